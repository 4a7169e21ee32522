"""Scheduling reads."""

from __future__ import annotations

from .models import Appointment, Clinic
from .scoping import scoped_get


def appointment_detail(clinic: Clinic, ref: str) -> Appointment:
    queryset = Appointment.objects.select_related(
        "clinic", "patient", "practitioner", "treatment", "resource"
    )
    return scoped_get(queryset, clinic, ref)
