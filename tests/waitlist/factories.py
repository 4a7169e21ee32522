"""Waitlist factories and helpers (the waitlist world is in tests/worlds.py)."""

from __future__ import annotations

import factory
from django.utils import timezone

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



def integration_client(clinic):
    """An API client holding only the clinic's decision-feed credential (no STAFF role)."""
    from scheduling.services import clinic_grant_decision_feed
    from tests.conftest import token_client

    user = f.UserFactory()
    clinic_grant_decision_feed(clinic=clinic, user=user)
    client = token_client(user)
    client.user = user
    return client


def lift_entry_window_guard() -> None:
    """Drop ``wl_entry_one_live_per_window`` for fixtures that reuse a few patients for many overlapping entries
    (bench-shaped data, generated eligibility cases), as bench/db.py does for its read benchmarks. Inside a
    test's transaction the drop rolls back with it; a transactional test restores it with
    ``restore_entry_window_guard``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE waitlist_waitlistentry DROP CONSTRAINT IF EXISTS wl_entry_one_live_per_window")


def restore_entry_window_guard() -> None:
    """Empty the entries (the flush after a transactional test would) and add the constraint back."""
    from django.db import connection

    from waitlist.models import WaitlistEntry

    (constraint,) = [c for c in WaitlistEntry._meta.constraints if c.name == "wl_entry_one_live_per_window"]
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE waitlist_waitlistentry CASCADE")
    with connection.schema_editor() as editor:
        editor.add_constraint(WaitlistEntry, constraint)
