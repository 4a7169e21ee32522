"""Scheduling reads."""

from __future__ import annotations

from datetime import date

from common.pagination import KeysetPage, day_bounds, keyset_page

from .models import Appointment, Clinic, ContactConsent, Patient
from .scoping import scoped_get
from .services.consent import consent_current


def appointment_detail(*, clinic: Clinic, ref: str) -> Appointment:
    queryset = Appointment.objects.select_related(
        "clinic", "patient", "practitioner", "treatment", "resource"
    )
    return scoped_get(queryset, clinic, ref)


def consent_view(*, patient: Patient, limit: int = 50) -> dict:
    """Consent as staff see it: the current state per channel and the newest changes (no contact data)."""
    history = (ContactConsent.objects.filter(patient=patient).order_by("-id")
               .values("ref", "channel", "state", "source", "actor", "recorded_at", "evidence")[:limit])
    return {
        "patient": patient.ref,
        "current": consent_current(patient.pk),
        "history": [{**row, "recorded_at": row["recorded_at"].isoformat()} for row in history],
    }


def consent_recent(*, clinic: Clinic, limit: int = 20) -> list[dict]:
    """The clinic's newest consent changes by patient ref (states and sources; never contact data)."""
    return list(ContactConsent.objects.filter(clinic=clinic).order_by("-id")
                .values("patient__ref", "channel", "state", "source", "actor", "recorded_at", "evidence")[:limit])
def appointment_page(
    *, clinic: Clinic, limit: int, after: str = "", status: str | None = None, day: date | None = None
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


def clinic_contact(clinic: Clinic) -> tuple[str, str]:
    """``(address, phone)`` that patients are told (``clinic.settings["contact"]``); "" for what is not set."""
    contact = (clinic.settings or {}).get("contact") or {}
    if not isinstance(contact, dict):
        return "", ""
    return str(contact.get("address") or ""), str(contact.get("phone") or "")
