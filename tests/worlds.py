"""The test worlds, in one place: a few related rows that a test starts from.

* ``waitlist_world()``: a Seoul clinic with the waitlist on, two practitioners, two 30-minute
  treatments and a STAFF user; ``waitlist_world(clinic, staff)`` builds the same on a given clinic
  (the console's ``clinic``, so ``staff_web``/``admin_web`` see it).
* ``ReevaluationWorld(clinic)``: two practitioners, two treatments, two rooms and a patient the CRM
  knows, with ``book()`` for appointments.
* ``ReferenceWorld``: the reference rows of the shared ``clinic`` fixtures, for the scheduling API.

Each directory's ``world`` fixture (conftest.py) is one of these.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.models import AppointmentStatus, Role
from scheduling.services import appointment_book
from tests import factories as f
from tests.conftest import seoul
from tests.reevaluation import factories as rf
from tests.waitlist.factories import WaitlistEntryFactory, decide


@dataclass
class WaitlistWorld:
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


def waitlist_world(clinic=None, staff=None, **clinic_kw) -> WaitlistWorld:
    """On ``clinic`` (a new Seoul clinic with ``clinic_kw`` if None), with ``staff`` (a new STAFF user if None)."""
    clinic = clinic or f.ClinicFactory(timezone="Asia/Seoul", **clinic_kw)
    doctor, other_doctor = f.PractitionerFactory(clinic=clinic), f.PractitionerFactory(clinic=clinic)
    treatment = f.TreatmentFactory(clinic=clinic, duration_minutes=30)
    other_treatment = f.TreatmentFactory(clinic=clinic, duration_minutes=30)
    return WaitlistWorld(
        clinic=clinic,
        doctor=doctor,
        other_doctor=other_doctor,
        treatment=treatment,
        other_treatment=other_treatment,
        staff=staff or f.user_with_role(clinic, Role.STAFF),
    )


class ReevaluationWorld:
    """One clinic with two practitioners, rooms and treatments, and a patient known to the CRM."""

    def __init__(self, clinic):
        self.clinic = clinic
        self.dr_a = f.PractitionerFactory(clinic=clinic)
        self.dr_b = f.PractitionerFactory(clinic=clinic)
        self.treatment = f.TreatmentFactory(clinic=clinic, duration_minutes=30)
        self.long_treatment = f.TreatmentFactory(clinic=clinic, duration_minutes=60)
        self.room = f.ResourceFactory(clinic=clinic, kind="ROOM")
        self.laser = f.ResourceFactory(clinic=clinic, kind="LASER")
        self.crm_ref = f"CRM-{clinic.pk}-001"
        self.fp = rf.fingerprint(self.crm_ref)
        self.patient = f.PatientFactory(clinic=clinic, crm_fingerprint=self.fp)
        self.other_patient = f.PatientFactory(clinic=clinic)

    def book(self, status: str, hour: int, *, practitioner=None, patient=None, resource=None, treatment=None):
        return appointment_book(
            clinic=self.clinic,
            patient=patient or self.patient,
            practitioner=practitioner or self.dr_a,
            treatment=treatment or self.treatment,
            resource=resource,
            starts_at=seoul(5, hour),
            status=status,
        )


@dataclass
class ReferenceWorld:
    clinic: object
    practitioner: object
    treatment: object
    resource: object
    patient: object
