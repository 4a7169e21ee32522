"""Waitlist factories and a small clinic world for the waitlist tests."""

from __future__ import annotations

from dataclasses import dataclass

import factory
from django.utils import timezone

from scheduling.models import AppointmentStatus, Role
from scheduling.services import appointment_book
from tests import factories as f
from tests.conftest import seoul
from waitlist.models import DecisionStatus, WaitlistEntry
from waitlist.services import decision_record

NOW = seoul(1, 9)  # tests run with the clock frozen here (time_machine)
DECISION_EXPIRY = seoul(20, 0)


class WaitlistEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WaitlistEntry

    clinic = factory.SubFactory(f.ClinicFactory)
    tenant_group = factory.SelfAttribute("clinic.tenant_group")
    patient = factory.SubFactory(f.PatientFactory, clinic=factory.SelfAttribute("..clinic"))
    treatment = factory.SubFactory(f.TreatmentFactory, clinic=factory.SelfAttribute("..clinic"))
    practitioner = None
    earliest = factory.LazyFunction(lambda: seoul(2, 0))
    latest = factory.LazyFunction(lambda: seoul(9, 0))
    priority_rank = 0
    waiting_since = factory.LazyFunction(timezone.now)


def decide(patient, status=DecisionStatus.FRESH, *, expires_at=DECISION_EXPIRY, rank=0, ref=None):
    return decision_record(
        clinic=patient.clinic,
        patient=patient,
        decision_ref=ref or f"dec-{patient.ref}-{status}-{expires_at.timestamp():.0f}",
        status=status,
        expires_at=expires_at,
        priority_rank=rank,
    )


@dataclass
class World:
    clinic: object
    doctor: object
    other_doctor: object
    treatment: object
    other_treatment: object
    staff: object

    def __post_init__(self):
        f.waitlist_on(self.clinic)  # a new tenant starts with the waitlist off

    def patient(self, **kw):
        return f.PatientFactory(clinic=self.clinic, **kw)

    def waiting(self, patient=None, *, fresh=True, **kw):
        """A WAITING entry for ``treatment`` (any practitioner unless given), with a FRESH decision whose
        rank is the entry's (a new decision's rank becomes the rank of the patient's open entries)."""
        patient = patient or self.patient()
        kw.setdefault("treatment", self.treatment)
        entry = WaitlistEntryFactory(clinic=self.clinic, patient=patient, **kw)
        if fresh:
            decide(patient, rank=entry.priority_rank)
        return entry

    def confirmed(self, starts_at, patient=None, **kw):
        return appointment_book(
            clinic=self.clinic,
            patient=patient or self.patient(),
            practitioner=kw.pop("practitioner", self.doctor),
            treatment=kw.pop("treatment", self.treatment),
            starts_at=starts_at,
            status=AppointmentStatus.CONFIRMED,
            **kw,
        )


def make_world(**clinic_kw) -> World:
    clinic = f.ClinicFactory(timezone="Asia/Seoul", **clinic_kw)
    return World(
        clinic=clinic,
        doctor=f.PractitionerFactory(clinic=clinic),
        other_doctor=f.PractitionerFactory(clinic=clinic),
        treatment=f.TreatmentFactory(clinic=clinic, duration_minutes=30),
        other_treatment=f.TreatmentFactory(clinic=clinic, duration_minutes=30),
        staff=f.user_with_role(clinic, Role.STAFF),
    )


def integration_client(clinic):
    """An API client holding only the clinic's decision-feed credential (no STAFF role)."""
    from scheduling.services import clinic_grant_decision_feed
    from tests.conftest import token_client

    user = f.UserFactory()
    clinic_grant_decision_feed(clinic=clinic, user=user)
    client = token_client(user)
    client.user = user
    return client
