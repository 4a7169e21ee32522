"""The benchmarks' bulk builders write rows the current schema accepts (hand-written INSERTs name every NOT NULL
column): a migration that adds a column without a database default must update them, or ``make bench`` breaks
while ``make test`` stays green (the reevaluation benchmark's HELD appointments once lacked the cancel reason)."""

from __future__ import annotations

import pytest

from bench import db
from bench.reevaluation import bulk_jobs, held_scopes
from reevaluation.models import ReevaluationJob
from scheduling.models import Appointment, CapacityAllocation
from waitlist.models import WaitlistEntry

pytestmark = pytest.mark.django_db


def test_held_scopes_writes_held_appointments_with_their_allocations():
    clinic = db.make_clinic("fx", practitioners=2)
    constraints = held_scopes(clinic, 3)
    held = Appointment.objects.filter(clinic=clinic, status="HELD")
    assert held.count() == 3
    assert CapacityAllocation.objects.filter(appointment__in=held, active=True).count() == 3
    assert constraints == {"requiredPractitioner": clinic.bench_practitioners[1].ref}


def test_bulk_jobs_and_entries_write_rows_the_schema_accepts():
    clinic = db.make_clinic("fy", practitioners=2)
    first, last = db.bulk_patients(clinic, 4, fingerprints=True)
    db.bulk_entries(clinic, 4, patients=(first, last), treatment_id=clinic.bench_treatments[0].pk,
                    practitioner_ids=[p.pk for p in clinic.bench_practitioners])
    bulk_jobs(clinic, 4)
    assert WaitlistEntry.objects.filter(clinic=clinic).count() == 4
    assert ReevaluationJob.objects.filter(clinic=clinic).count() == 4
