"""Scheduling reads."""

from __future__ import annotations

from .models import Appointment, Clinic, ContactConsent, Patient
from .scoping import scoped_get
from .services.consent import consent_current


def appointment_detail(clinic: Clinic, ref: str) -> Appointment:
    queryset = Appointment.objects.select_related(
        "clinic", "patient", "practitioner", "treatment", "resource"
    )
    return scoped_get(queryset, clinic, ref)


def consent_view(patient: Patient, limit: int = 50) -> dict:
    """Consent as staff see it: the current state per channel and the newest changes (no contact data)."""
    history = (ContactConsent.objects.filter(patient=patient).order_by("-id")
               .values("ref", "channel", "state", "source", "actor", "recorded_at")[:limit])
    return {
        "patient": patient.ref,
        "current": consent_current(patient.pk),
        "history": [{**row, "recorded_at": row["recorded_at"].isoformat()} for row in history],
    }


def consent_recent(clinic: Clinic, limit: int = 20) -> list[dict]:
    """The clinic's newest consent changes by patient ref (states and sources; never contact data)."""
    return list(ContactConsent.objects.filter(clinic=clinic).order_by("-id")
                .values("patient__ref", "channel", "state", "source", "actor", "recorded_at")[:limit])
