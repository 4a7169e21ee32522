"""Fair dispatch: global and per-clinic limits, a persisted cursor, and no starvation behind a backlog.

Bound (docs/reevaluation.md): with N clinics holding PENDING work, a round serves at least
K = global_limit // per_clinic_limit clinics round-robin after the cursor, so every clinic is served
within ceil(N / K) rounds, regardless of any one clinic's backlog.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reevaluation.models import DispatchCursor, JobState, PriorityClass, ReevaluationJob
from reevaluation.services import dispatch_round
from tests import factories as f
from tests.conftest import race
from tests.reevaluation import factories as rf

GLOBAL, PER_CLINIC = 20, 5
pytestmark = pytest.mark.django_db


def clinics(n: int):
    made = [f.ClinicFactory() for _ in range(n)]
    for clinic in made:
        rf.enable(clinic)
    return made


def test_small_clinics_are_served_within_the_bound_behind_a_10k_backlog():
    big = clinics(1)[0]  # the lowest id: a naive ORDER BY id would serve only this clinic
    small = clinics(10)
    rf.bulk_jobs(big, 10_000)
    for clinic in small:
        rf.bulk_jobs(clinic, 5)

    k = GLOBAL // PER_CLINIC
    bound = math.ceil(11 / k)  # 11 clinics with work, 4 served per round → 3 rounds
    served: Counter = Counter()
    for _ in range(bound):
        claims = dispatch_round(global_limit=GLOBAL, per_clinic_limit=PER_CLINIC)
        assert len(claims) <= GLOBAL
        per_round = Counter(c.clinic_id for c in claims)
        assert max(per_round.values()) <= PER_CLINIC
        served.update(per_round)

    for clinic in small:
        assert served[clinic.pk] == 5, "every small clinic is fully claimed within the bound"
    assert served[big.pk] >= PER_CLINIC  # the big clinic still progresses
    assert (
        ReevaluationJob.objects.filter(clinic=big, state=JobState.PENDING).count() == 10_000 - served[big.pk]
    )

    # Only the big clinic has work now; a new clinic arriving behind it is claimed in the next round.
    dispatch_round(global_limit=GLOBAL, per_clinic_limit=PER_CLINIC)
    newcomer = clinics(1)[0]
    rf.bulk_jobs(newcomer, 1)
    claims = dispatch_round(global_limit=GLOBAL, per_clinic_limit=PER_CLINIC)
    assert newcomer.pk in {c.clinic_id for c in claims}
    assert big.pk in {c.clinic_id for c in claims}


def test_round_cost_does_not_grow_with_the_backlog():
    big = clinics(1)[0]
    rf.bulk_jobs(big, 3_000)
    dispatch_round(global_limit=GLOBAL, per_clinic_limit=PER_CLINIC)  # creates the cursor row
    with CaptureQueriesContext(connection) as small_backlog:
        dispatch_round(global_limit=GLOBAL, per_clinic_limit=PER_CLINIC)
    rf.bulk_jobs(big, 3_000)
    with CaptureQueriesContext(connection) as large_backlog:
        dispatch_round(global_limit=GLOBAL, per_clinic_limit=PER_CLINIC)
    assert len(large_backlog) == len(small_backlog) <= 10
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE reevaluation_reevaluationjob")
        cursor.execute(
            "EXPLAIN SELECT id FROM reevaluation_reevaluationjob WHERE clinic_id = %s AND state = 'PENDING'"
            " ORDER BY priority, due_at, id LIMIT 5",
            [big.pk],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "rjob_claim" in plan, plan


def test_cursor_is_the_last_clinic_id_and_resumes_after_it():
    a, b, c = clinics(3)
    for clinic in (a, b, c):
        rf.bulk_jobs(clinic, 10)
    first = dispatch_round(global_limit=4, per_clinic_limit=2)
    assert [x.clinic_id for x in first] == [a.pk, a.pk, b.pk, b.pk]
    assert DispatchCursor.objects.get().last_clinic_id == b.pk
    second = dispatch_round(global_limit=4, per_clinic_limit=2)
    assert [x.clinic_id for x in second] == [c.pk, c.pk, a.pk, a.pk]  # resumes after b, wraps to a


def test_priority_then_due_order_inside_a_clinic():
    clinic = clinics(1)[0]
    proposed = rf.bulk_jobs(clinic, 3)
    held = rf.bulk_jobs(clinic, 2, priority_class=PriorityClass.HELD_PRESENT)
    claims = dispatch_round(global_limit=10, per_clinic_limit=3)
    assert [c.job_id for c in claims] == [held[0].pk, held[1].pk, proposed[0].pk]


def test_disabled_and_draining_clinics_get_no_claims():
    active, disabled, draining = clinics(3)
    rf.enable(disabled, mode="DISABLED")
    rf.enable(draining, drain="DRAINING")
    for clinic in (active, disabled, draining):
        rf.bulk_jobs(clinic, 2)
    claims = dispatch_round(global_limit=10, per_clinic_limit=5)
    assert {c.clinic_id for c in claims} == {active.pk}


def test_a_duplicate_tick_is_a_no_op():
    clinic = clinics(1)[0]
    rf.bulk_jobs(clinic, 3)
    assert len(dispatch_round(global_limit=10, per_clinic_limit=5)) == 3
    assert dispatch_round(global_limit=10, per_clinic_limit=5) == []
    job = ReevaluationJob.objects.filter(clinic=clinic).first()
    assert job.state == JobState.RUNNING and job.attempts == 1 and job.lease_owner.startswith("dispatch:")


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_dispatchers_never_claim_a_job_twice():
    made = clinics(4)
    for clinic in made:
        rf.bulk_jobs(clinic, 6)
    results = race(lambda i: dispatch_round(global_limit=8, per_clinic_limit=3), 4)
    claims = [c for r in results for c in r]
    assert not [r for r in results if isinstance(r, BaseException)]
    ids = [c.job_id for c in claims]
    assert len(ids) == len(set(ids)) == 24
    running = ReevaluationJob.objects.filter(state=JobState.RUNNING)
    assert running.count() == 24 and all(j.attempts == 1 for j in running)
