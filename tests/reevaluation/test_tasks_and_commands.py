"""Beat entries, Celery wrappers and management commands are thin and idempotent."""

from __future__ import annotations

from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command

from config.celery import app
from reevaluation import tasks
from reevaluation.models import JobState, ReevaluationJob
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event

pytestmark = pytest.mark.django_db


def test_beat_entries_name_registered_tasks():
    names = {
        entry["task"]
        for key, entry in settings.CELERY_BEAT_SCHEDULE.items()
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
