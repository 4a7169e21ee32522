"""Scheduling reads."""

from __future__ import annotations

from datetime import date

from common.pagination import KeysetPage, day_bounds, keyset_page

from .models import Appointment, Clinic
from .scoping import scoped_get


def appointment_detail(clinic: Clinic, ref: str) -> Appointment:
    queryset = Appointment.objects.select_related(
        "clinic", "patient", "practitioner", "treatment", "resource"
    )
    return scoped_get(queryset, clinic, ref)


def appointment_page(
    clinic: Clinic, *, limit: int, after: str = "", status: str | None = None, day: date | None = None
) -> KeysetPage:
    """The clinic's appointments by start time (keyset on ``appointment_clinic_start``), one query."""
    queryset = Appointment.objects.filter(clinic=clinic).select_related(
        "clinic", "patient", "practitioner", "treatment", "resource"
    )
    if status:
        queryset = queryset.filter(status=status)
    if day:
        start, end = day_bounds(day, clinic.timezone)
        queryset = queryset.filter(starts_at__gte=start, starts_at__lt=end)
    return keyset_page(queryset, field="starts_at", limit=limit, after=after)
