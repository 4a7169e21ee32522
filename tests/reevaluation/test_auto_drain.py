"""Repeated quarantine stops the clinic's consumer: an automatic drain that only an ADMIN lifts."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
import time_machine
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.db import connections
from django.utils import timezone

from common.errors import DomainError
from common.models import AuditEntry
from config.celery import app
from reevaluation import selectors
from reevaluation.models import ClinicReevaluationSettings, DrainState, JobState, QuarantineCase, ReevaluationJob
from reevaluation.services import dispatch_round, drain_refresh, drain_set
from reevaluation.tasks import run_job
from tests import factories as f
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event
from tests.worlds import ReevaluationWorld

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def threshold(settings):
    settings.REEVALUATION_AUTO_DRAIN_QUARANTINE_THRESHOLD = 2
    settings.REEVALUATION_AUTO_DRAIN_WINDOW_MINUTES = 60


def quarantined_event(world, i: int) -> None:
    """An event id used again with another body: EVENT_ID_REUSED, attributed to the clinic. (A privacy-boundary
    case from a signed source stops the clinic at once: tests/reevaluation/test_privacy_stop.py.)"""
    event_id = f"reuse-{world.clinic.pk}-{i}-{uuid.uuid4().hex}"
    fp = rf.fingerprint(f"q-{world.clinic.pk}-{i}-{uuid.uuid4().hex}")
    post_event(world, fp, 1, eventId=event_id)
    with pytest.raises(DomainError):
        post_event(world, fp, 2, eventId=event_id)


def row(clinic) -> ClinicReevaluationSettings:
    return ClinicReevaluationSettings.objects.get(clinic=clinic)


def test_quarantine_repeated_beyond_the_threshold_drains_the_clinic(world):
    rf.enable(world.clinic, "DRY_RUN")
    for i in range(3):
        quarantined_event(world, i)
    settings_row = row(world.clinic)
    assert settings_row.drain_state == DrainState.DRAINED  # nothing was running
    assert settings_row.drain_cause == "QUARANTINE_REPEATED"
    assert settings_row.drain_detail["quarantine_count"] == 3
    assert settings_row.drain_detail["latest_reason_code"] == "EVENT_ID_REUSED"
    audit = AuditEntry.objects.get(action="reevaluation.auto_drain")
    assert audit.actor_id is None and audit.result["to"] == "DRAINED"
    post_event(world, world.fp, 1)
    assert dispatch_round() == []  # the consumer is stopped


def test_quarantine_up_to_the_threshold_keeps_the_clinic_active(world):
    rf.enable(world.clinic, "DRY_RUN")
    for i in range(2):
        quarantined_event(world, i)
    assert row(world.clinic).drain_state == DrainState.ACTIVE
    assert QuarantineCase.objects.filter(clinic=world.clinic).count() == 2


def test_cases_outside_the_window_do_not_count(world):
    rf.enable(world.clinic, "DRY_RUN")
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        quarantined_event(world, 0)
        quarantined_event(world, 1)
    with time_machine.travel(start + timedelta(minutes=61), tick=False):
        quarantined_event(world, 2)
    assert row(world.clinic).drain_state == DrainState.ACTIVE


def test_only_an_admin_resumes_and_cases_before_the_resume_do_not_drain_again(world, admin):
    rf.enable(world.clinic, "DRY_RUN")
    for i in range(3):
        quarantined_event(world, i)
    assert drain_refresh() == 0 and row(world.clinic).drain_state == DrainState.DRAINED  # no auto-resume
    drain_set(clinic=world.clinic, state="ACTIVE", actor=admin, reason="CRM fixed the payload")
    settings_row = row(world.clinic)
    assert (settings_row.drain_state, settings_row.drain_cause) == (DrainState.ACTIVE, "")
    quarantined_event(world, 3)
    assert row(world.clinic).drain_state == DrainState.ACTIVE  # 1 case since the resume


def test_an_auto_drain_with_work_in_flight_drains_then_finishes(world, crm):
    rf.enable(world.clinic, "DRY_RUN")
    post_event(world, world.fp, 1, crm)
    [claim] = dispatch_round()
    for i in range(3):
        quarantined_event(world, i)
    assert row(world.clinic).drain_state == DrainState.DRAINING
    from reevaluation.jobs import worker as worker_module

    worker_module.job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt)
    assert drain_refresh() == 1
    settings_row = row(world.clinic)
    assert (settings_row.drain_state, settings_row.drain_cause) == (DrainState.DRAINED, "QUARANTINE_REPEATED")


def test_the_drain_state_is_exposed_for_a_gauge_and_the_snapshot(world, staff_client):
    other = f.ClinicFactory()
    rf.enable(world.clinic, "DRY_RUN")
    rf.enable(other, "DRY_RUN", drain="DRAINED")
    for i in range(3):
        quarantined_event(world, i)
    gauge = {r["clinic"]: r for r in selectors.drained_clinics()}
    assert gauge[world.clinic.ref]["drain_cause"] == "QUARANTINE_REPEATED"
    assert gauge[other.ref]["drain_cause"] == "ADMIN" and gauge[other.ref]["drain_state"] == "DRAINED"
    body = staff_client.get("/api/v1/ops/profile-reevaluation", {"clinic": world.clinic.ref}).json()
    assert body["drain_cause"] == "QUARANTINE_REPEATED" and body["drain_detail"]["quarantine_count"] == 3


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_quarantining_assessments_stops_the_clinic(crm):
    """Jobs run by a Celery worker over the real Redis broker; the CRM tampers with every answer."""
    clinic = f.ClinicFactory()
    world = ReevaluationWorld(clinic)
    rf.enable(clinic, "DRY_RUN")
    for i in range(4):
        post_event(world, rf.fingerprint(f"tamper-{clinic.pk}-{i}"), 1, crm)
    crm.mode = "tamper"
    claims = dispatch_round(per_clinic_limit=10)
    assert len(claims) == 4
    done = threading.Semaphore(0)

    def on_postrun(**_kwargs):
        connections.close_all()  # the worker thread's connection, so the test database can be dropped
        done.release()

    task_postrun.connect(on_postrun, weak=False)
    queue = f"test-reeval-{uuid.uuid4().hex[:8]}"
    try:
        with start_worker(app, pool="solo", queues=[queue], perform_ping_check=False, shutdown_timeout=30):
            for claim in claims:
                run_job.apply_async(args=[claim.job_id, claim.owner, claim.attempt], queue=queue)
            for _ in claims:
                assert done.acquire(timeout=60), "the worker did not run every job"
    finally:
        task_postrun.disconnect(on_postrun)
    assert set(ReevaluationJob.objects.filter(clinic=clinic).values_list("state", flat=True)) == {JobState.FAILED}
    # The third case drained the clinic while the fourth job was still in flight: DRAINING, then the
    # beat's drain_refresh finishes the move once no lease is active.
    assert row(clinic).drain_state == DrainState.DRAINING
    assert drain_refresh() == 1
    settings_row = row(clinic)
    assert (settings_row.drain_state, settings_row.drain_cause) == (DrainState.DRAINED, "QUARANTINE_REPEATED")
    assert settings_row.drain_detail["latest_reason_code"] == "ASSESSMENT_HASH_MISMATCH"
    # The evidence is kept: one case per refused assessment.
    assert QuarantineCase.objects.filter(clinic=clinic, source="ASSESSMENT").count() == 4
