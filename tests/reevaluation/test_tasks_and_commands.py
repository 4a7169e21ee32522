"""Beat entries, Celery wrappers and management commands are thin and idempotent."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from common.taskwiring import periodic_schedule
from config.celery import app
from reevaluation import tasks
from reevaluation.models import JobState, ReevaluationJob
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event

pytestmark = pytest.mark.django_db


def test_beat_entries_name_registered_tasks():
    names = {
        entry["task"]
        for key, entry in periodic_schedule().items()
        if key.startswith("reevaluation")
    }
    assert names == {
        "reevaluation.tasks.dispatch_round",
        "reevaluation.tasks.rescue_leases",
        "reevaluation.tasks.wake_retries",
        "reevaluation.tasks.expire_proposals",
    }
    app.loader.import_default_modules()
    assert names <= set(app.tasks)


@pytest.fixture
def eager():
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


def test_dispatch_task_runs_claims_through_the_worker(world, crm, eager):
    rf.enable(world.clinic, "DRY_RUN")
    post_event(world, world.fp, 1, crm)
    assert tasks.dispatch_round() == 1
    assert ReevaluationJob.objects.get().state == JobState.COMPLETED
    assert tasks.dispatch_round() == 0  # a duplicate tick finds nothing
    assert tasks.rescue_leases() == 0 and tasks.wake_retries_task() == 0


def test_a_full_round_queues_the_next_at_once_until_the_backlog_is_done(world, crm, eager, settings):
    """Beat's round task runs its round in the worker and, while rounds come back full, queues the next
    rather than waiting for beat's next tick."""
    settings.REEVALUATION_DISPATCH_GLOBAL_LIMIT = 2
    settings.REEVALUATION_DISPATCH_PER_CLINIC_LIMIT = 2
    rf.enable(world.clinic, "DRY_RUN")
    for i in range(5):
        post_event(world, rf.fingerprint(f"backlog-{world.clinic.pk}-{i}"), 1, crm)
    assert tasks.dispatch_round() == 2  # this round's; the kicked rounds ran the other three
    assert set(ReevaluationJob.objects.values_list("state", flat=True)) == {JobState.COMPLETED}


def test_with_worker_rounds_off_each_claim_is_a_run_job_task(world, crm, eager, settings, monkeypatch):
    settings.REEVALUATION_WORKER_ROUNDS = False
    queued = []
    monkeypatch.setattr(tasks.run_job, "delay", lambda *args: queued.append(args))
    rf.enable(world.clinic, "DRY_RUN")
    post_event(world, world.fp, 1, crm)
    assert tasks.dispatch_round() == 1
    job = ReevaluationJob.objects.get()
    assert (job.state, queued) == (JobState.RUNNING, [(job.pk, job.lease_owner, job.attempts)])


@pytest.mark.django_db(transaction=True)
def test_a_rounds_leases_are_renewed_while_its_assessments_are_fetched(world, crm):
    import threading

    from reevaluation.jobs.worker import LeaseKeeper
    from reevaluation.services import dispatch_round

    rf.enable(world.clinic, "DRY_RUN")
    for i in range(2):
        post_event(world, rf.fingerprint(f"keep-{world.clinic.pk}-{i}"), 1, crm)
    claims = dispatch_round(for_worker=True)
    before = dict(ReevaluationJob.objects.values_list("pk", "lease_expires_at"))
    renewed = threading.Event()
    with LeaseKeeper(*[c.fence for c in claims], interval=0.05) as keeper:
        for _ in range(200):
            now = dict(ReevaluationJob.objects.values_list("pk", "lease_expires_at"))
            if all(now[pk] > before[pk] for pk in before):
                renewed.set()
                break
            renewed.wait(0.05)
    assert renewed.is_set() and not keeper.lost


def test_management_commands(world, crm):
    rf.enable(world.clinic, "DRY_RUN")
    out = StringIO()
    call_command(
        "reevaluation_demo_event",
        clinic=world.clinic.ref,
        crm_patient_ref=world.crm_ref,
        revision=1,
        stdout=out,
    )
    assert out.getvalue().startswith("ACCEPTED rjb_")
    call_command("reevaluation_wake_retries", stdout=out)
    call_command("reevaluation_rescue_leases", stdout=out)
    assert ReevaluationJob.objects.get().state == JobState.PENDING
