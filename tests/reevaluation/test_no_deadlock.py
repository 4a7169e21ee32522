"""No deadlocks between job runs, dispatch rounds and redrives of one clinic (issue 13, part 4).

Rows that others reference by foreign key, and whose key never changes, are locked ``FOR NO KEY
UPDATE``: an insert that references them (``FOR KEY SHARE``) is then never blocked by the lock, and
a lock never spreads to joined parent rows (``of=("self",)``). The race runs real connections and
reads PostgreSQL's own deadlock counter, because the worker turns any write-back error (a deadlock
included) into a retry. The source audit (every lock ``no_key=True``) is in tests/test_guardrails.py.
"""

from __future__ import annotations

import pytest
from django.db import connection

from reevaluation.jobs import worker as worker_module
from reevaluation.models import JobState, ReevaluationJob, ReevaluationOutcome
from reevaluation.services import dispatch_round, redrive_execute, redrive_preview
from scheduling.models import Role
from tests import factories as f
from tests.conftest import race
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event
from tests.worlds import ReevaluationWorld


def _deadlocks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_job_runs_dispatch_rounds_and_redrives_of_one_clinic_never_deadlock(crm, settings):
    clinic = f.ClinicFactory()
    admin = f.user_with_role(clinic, Role.ADMIN, username="race-admin")
    world = ReevaluationWorld(clinic)
    rf.enable(clinic, "APPLY_PROPOSED_AND_HELD")
    constraints = {"requiredPractitioner": world.dr_b.ref}
    patients = []
    for i in range(6):
        fp = rf.fingerprint(f"race-{clinic.pk}-{i}")
        patient = f.PatientFactory(clinic=clinic, crm_fingerprint=fp)
        world.book("HELD", 8 + i, patient=patient)
        world.book("PROPOSED", 8 + i, patient=patient, practitioner=world.dr_b)
        patients.append(fp)
    # FAILED jobs (transient) for the redrives, each still its scope's head.
    failed_refs = []
    for i in range(6):
        fp = rf.fingerprint(f"race-failed-{clinic.pk}-{i}")
        f.PatientFactory(clinic=clinic, crm_fingerprint=fp)
        failed_refs.append(post_event(world, fp, 1, crm, constraints=constraints).job_ref)
    ReevaluationJob.objects.filter(ref__in=failed_refs).update(
        state=JobState.FAILED, attempts=5, last_failure_code="ASSESSMENT_TIMEOUT"
    )
    for fp in patients:
        post_event(world, fp, 1, crm, constraints=constraints)
    before = _deadlocks()

    def dispatch_and_run(_i):
        return [
            worker_module.job_run(job_id=c.job_id, owner=c.owner, attempt=c.attempt)
            for c in dispatch_round(per_clinic_limit=2)
        ]

    for _round in range(3):
        preview = redrive_preview(clinic=clinic, actor=admin, reason="race redrive", limit=3).preview_ref

        def work(i, preview=preview):
            if i == 0:
                return redrive_execute(clinic=clinic, actor=admin, preview_ref=preview, reason="race redrive")
            return dispatch_and_run(i)

        results = race(work, 4)
        assert not [r for r in results if isinstance(r, Exception)], results
    # Drain what is left (redriven children included), still racing the rounds.
    for _ in range(4):
        race(dispatch_and_run, 3)
    assert _deadlocks() == before
    assert not ReevaluationJob.objects.filter(clinic=clinic, last_failure_code="WORKER_ERROR").exists()
    assert not ReevaluationJob.objects.filter(clinic=clinic, state=JobState.RUNNING).exists()
    assert ReevaluationOutcome.objects.filter(clinic=clinic).exists()


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_a_write_back_in_progress_does_not_block_a_redrive_of_the_same_clinic(crm, monkeypatch):
    """The shape of the reported deadlock: a job write-back locked the clinic row (joined into its
    FOR UPDATE), so a redrive inserting child jobs (FOR KEY SHARE on the clinic) queued behind it."""
    import threading

    from django.db import OperationalError

    clinic = f.ClinicFactory()
    admin = f.user_with_role(clinic, Role.ADMIN, username="race-admin")
    world = ReevaluationWorld(clinic)
    rf.enable(clinic, "APPLY_PROPOSED_AND_HELD")
    world.book("HELD", 9)
    failed_fp = rf.fingerprint(f"blocked-{clinic.pk}")
    failed_ref = post_event(world, failed_fp, 1, crm).job_ref
    ReevaluationJob.objects.filter(ref=failed_ref).update(
        state=JobState.FAILED, attempts=5, last_failure_code="ASSESSMENT_TIMEOUT"
    )
    preview = redrive_preview(clinic=clinic, actor=admin, reason="redrive while running", limit=5)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    [claim] = dispatch_round()
    inside, release = threading.Event(), threading.Event()
    original = worker_module._decide_all

    def paused(*args):
        inside.set()
        release.wait(20)
        return original(*args)

    monkeypatch.setattr(worker_module, "_decide_all", paused)
    results = []

    def run():
        try:
            results.append(worker_module.job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt))
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert inside.wait(20), "the write-back never started"
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '3s'")
        try:
            result = redrive_execute(clinic=clinic, actor=admin, preview_ref=preview.preview_ref, reason="redrive")
        except OperationalError as exc:  # lock_timeout: the redrive queued behind the write-back
            pytest.fail(f"the redrive waited for the running write-back: {type(exc).__name__}")
    finally:
        release.set()
        thread.join(30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert result.count == 1
    assert results == [JobState.COMPLETED]
