"""Waitlist demo rows for `manage.py seed_demo`, built through the services (idempotent).

Turns the ``waitlist`` flag on for the demo tenant, publishes a policy per demo clinic and puts a few
demo patients on the waitlist around tomorrow, each with a FRESH booking-reliability decision, so
cancelling tomorrow's CONFIRMED 09:00 or 10:00 appointment at Gangnam Clinic creates an offer and the
console provider logs the claim link.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

from scheduling.models import Clinic
from scheduling.services.features import feature_enabled, feature_set
from waitlist.models import DecisionStatus, EntryStatus, WaitlistEntry, WaitlistPolicy
from waitlist.services import decision_record, entry_create, policy_publish

# clinic ref → [(patient display name, treatment name, practitioner name or None, window hours)]
WAITING = {
    "cl_demo_gangnam": [
        ("Choi Yuna", "Physiotherapy", None, (8, 18)),
        ("Alex Morgan", "Physiotherapy", "Dr. Seo", (8, 12)),
        ("Lee Jiho", "Consultation", "Dr. Park", (13, 18)),
    ],
    "cl_demo_lisbon": [
        ("Marta Sousa", "Dental check", None, (8, 18)),
        ("João Pereira", "Dental check", "Dr. Almeida", (8, 12)),
    ],
}


def _flag_on(tenant, clinics: list[Clinic]) -> None:
    """A new tenant starts with the waitlist off: the demo allowlists its tenant and switches its clinics on."""
    if all(feature_enabled("waitlist", c) for c in clinics):
        return
    feature_set(name="waitlist", actor=None, reason="demo seed", enabled=True, tenant=tenant, tenant_allowed=True,
                system_label="seed_demo")
    for clinic in clinics:
        feature_set(name="waitlist", actor=None, reason="demo seed", clinic=clinic, clinic_enabled=True,
                    system_label="seed_demo")


def _waiting(clinic: Clinic, now: datetime) -> None:
    zone = ZoneInfo(clinic.timezone)
    tomorrow = now.astimezone(zone).date() + timedelta(days=1)
    for name, treatment_name, practitioner_name, (start, end) in WAITING.get(clinic.ref, []):
        patient = clinic.patients.filter(display_name=name).first()
        treatment = clinic.treatments.filter(name=treatment_name).first()
        if patient is None or treatment is None:
            continue
        decision_record(
            clinic=clinic,
            patient=patient,
            decision_ref=f"demo-{patient.ref}",
            status=DecisionStatus.FRESH,
            expires_at=now + timedelta(days=30),
        )
        if WaitlistEntry.objects.filter(
            clinic=clinic, patient=patient, treatment=treatment, status=EntryStatus.WAITING
        ).exists():
            continue
        entry_create(
            clinic=clinic,
            patient=patient,
            treatment=treatment,
            practitioner=clinic.practitioners.filter(name=practitioner_name).first() if practitioner_name else None,
            earliest=datetime.combine(tomorrow, time(start), tzinfo=zone),
            latest=datetime.combine(tomorrow, time(end), tzinfo=zone),
        )


def _joining_on(clinic: Clinic) -> None:
    """Patients may join the demo clinics' lists themselves (``/join/<clinic>/``) for every treatment; seed data
    written as the other demo rows are (the ADMIN command is ``join_settings_set``, audited)."""
    from waitlist.joining.models import JoinSettings

    settings, created = JoinSettings.objects.get_or_create(clinic=clinic, defaults={"enabled": True})
    if created:
        settings.treatments.set(clinic.treatments.all())


def seed_demo(world: dict) -> None:
    now = timezone.now()
    clinics: list[Clinic] = world["clinics"]
    with transaction.atomic():
        _flag_on(world["tenant"], clinics)
        for clinic in clinics:
            if not WaitlistPolicy.objects.filter(clinic=clinic).exists():
                policy_publish(clinic=clinic, hold_minutes=15)
            _waiting(clinic, now)
            _joining_on(clinic)
