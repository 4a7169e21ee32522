"""Faults with real servers during a job run: a killed connection, a SIGKILLed worker, a slow or failing CRM.

After recovery each job completes exactly once and every invariant holds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

from common.models import OutboxMessage
from observability.invariants import check
from reevaluation.jobs import worker as worker_module
from reevaluation.models import JobState, ReevaluationJob, ReevaluationOutcome
from reevaluation.services import dispatch_round, rescue_expired_leases, wake_retries
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event, run_round
from tests.support.faults import backend_pid, kill_connection
from tests.support.processes import BASE_DIR, child_env

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scene(world):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    world.book("PROPOSED", 9)
    world.book("HELD", 11)
    world.book("CONFIRMED", 14)
    world.constraints = {"requiredPractitioner": world.dr_b.ref}
    return world


def completed_once(job_ref: str) -> None:
    job = ReevaluationJob.objects.get(ref=job_ref)
    assert job.state == JobState.COMPLETED
    assert OutboxMessage.objects.filter(topic="reevaluation.job_completed").count() == 1
    # The PROPOSED and the HELD one, and the CONFIRMED one that no longer fits (a proposal, never a change).
    assert ReevaluationOutcome.objects.filter(job=job).count() == 3
    report = check()
    assert report.ok, report.summary()


def rescue_and_run() -> list[str]:
    with time_machine.travel(timezone.now() + timedelta(seconds=61), tick=False):
        assert rescue_expired_leases() == 1
        return run_round()


def test_a_connection_killed_during_the_write_back_rolls_back_and_the_retry_completes_once(scene, crm, monkeypatch):
    job_ref = post_event(scene, scene.fp, 1, crm, constraints=scene.constraints).job_ref
    original = worker_module.job_complete

    def killed_midway(fence, **kwargs):
        kill_connection(backend_pid())
        return original(fence, **kwargs)

    monkeypatch.setattr(worker_module, "job_complete", killed_midway)
    # The write-back fails on the dead connection and rolls back; the worker records a retry on a new one.
    assert run_round() == [JobState.RETRY_WAIT]
    job = ReevaluationJob.objects.get(ref=job_ref)
    assert job.last_failure_code == "WORKER_ERROR" and not ReevaluationOutcome.objects.exists()
    assert check().ok
    monkeypatch.setattr(worker_module, "job_complete", original)
    with time_machine.travel(job.next_attempt_at, tick=False):
        assert wake_retries() == 1
        assert run_round() == [JobState.COMPLETED]
    completed_once(job_ref)


WORKER = """
import django, sys
django.setup()
from reevaluation.services import dispatch_round
from reevaluation.jobs.worker import job_run
for claim in dispatch_round():
    print("claimed", claim.job_id, flush=True)
    print(job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt), flush=True)
"""


def test_a_worker_sigkilled_mid_lease_is_rescued_and_the_job_completes_once(scene, crm):
    job_ref = post_event(scene, scene.fp, 1, crm, constraints=scene.constraints).job_ref
    crm.mode, crm.delay = "slow", 120  # the worker waits on the CRM, holding its lease
    database = connection.settings_dict
    env = child_env({
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "CRM_BASE_URL": crm.base_url,
        "CRM_READ_TIMEOUT_SECONDS": "300",
    })
    worker = subprocess.Popen([sys.executable, "-c", WORKER], cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().startswith("claimed")
        assert crm.called.wait(timeout=60), "the worker never called the CRM"
        assert crm.calls == 1
        job = ReevaluationJob.objects.get(ref=job_ref)
        assert job.state == JobState.RUNNING and job.lease_owner.startswith("worker:")
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    assert worker.returncode == -signal.SIGKILL
    assert check().ok
    crm.mode = "ok"
    assert rescue_and_run() == [JobState.COMPLETED]
    completed_once(job_ref)


def test_a_crm_that_is_slow_then_answers_5xx_delays_the_job_without_losing_it(scene, crm):
    job_ref = post_event(scene, scene.fp, 1, crm, constraints=scene.constraints).job_ref
    now = timezone.now()
    for mode, code in (("slow", "ASSESSMENT_TIMEOUT"), ("error", "ASSESSMENT_UNAVAILABLE")):
        crm.mode = mode
        with time_machine.travel(now, tick=False):
            wake_retries()
            assert run_round() == [JobState.RETRY_WAIT]
        job = ReevaluationJob.objects.get(ref=job_ref)
        assert job.last_failure_code == code
        assert check().ok
        now = job.next_attempt_at
    crm.mode = "ok"
    with time_machine.travel(now, tick=False):
        assert wake_retries() == 1
        assert run_round() == [JobState.COMPLETED]
    assert dispatch_round() == []
    completed_once(job_ref)
