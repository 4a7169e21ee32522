"""Beat's schedule and the tasks' queues come from the apps that own the tasks (``common.taskwiring``), not from
the settings (issue 42): beat's scheduler reads every app's entries, and a task sent with no queue lands on
its own queue in the real Redis broker."""

from __future__ import annotations

import uuid

import pytest
import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common import taskwiring
from common.tasks import deliver_outbox, reclaim_outbox
from config.celery import app
from interop.tasks import fanout_subscriptions
from observability.beat import RecordingScheduler
from reevaluation.tasks import dispatch_round, run_job
from waitlist.tasks import deliver_notices, expire_offers, reconcile


def test_no_setting_schedules_or_routes_a_task():
    assert not hasattr(settings, "CELERY_BEAT_SCHEDULE")
    assert not hasattr(settings, "CELERY_TASK_ROUTES")


def test_beats_scheduler_reads_every_apps_entries(tmp_path):
    scheduler = RecordingScheduler(app=app, schedule_filename=str(tmp_path / "schedule"), lazy=False)
    try:
        tasks = {name: entry.task for name, entry in scheduler.schedule.items()}
    finally:
        scheduler.close()
    assert tasks["deliver-outbox"] == deliver_outbox.name  # common
    assert tasks["waitlist-reconcile"] == reconcile.name  # waitlist
    assert tasks["reevaluation-dispatch-round"] == dispatch_round.name  # reevaluation
    assert tasks["fhir-subscription-fanout"] == fanout_subscriptions.name  # interop
    assert {name for name in tasks if not name.startswith("celery.")} == set(taskwiring.periodic_schedule())


def test_an_interval_an_operator_may_tune_is_the_settings(settings):
    assert taskwiring.periodic_schedule()["waitlist-expire-offers"] == {
        "task": expire_offers.name, "schedule": settings.WAITLIST_EXPIRE_EVERY_SECONDS}


def test_the_same_entry_registered_again_is_a_no_op_and_a_different_one_is_refused():
    before = taskwiring.periodic_schedule()
    taskwiring.periodic_register("reclaim-outbox", reclaim_outbox, every=60.0)
    assert taskwiring.periodic_schedule() == before
    with pytest.raises(ImproperlyConfigured):
        taskwiring.periodic_register("reclaim-outbox", reclaim_outbox, every=5.0)
    with pytest.raises(ImproperlyConfigured):
        taskwiring.periodic_register("reclaim-outbox", deliver_outbox, every=60.0)
    assert taskwiring.periodic_schedule() == before


@pytest.mark.parametrize(("task", "queue"), [
    (deliver_outbox, "delivery"),
    (deliver_notices, "delivery"),
    (run_job, "reevaluation"),
    (dispatch_round, "reevaluation"),
    (reconcile, "maintenance"),
])
def test_a_task_sent_without_a_queue_lands_on_its_own(task, queue):
    broker = redis.Redis.from_url(app.conf.broker_url)
    task_id = f"queue-test-{uuid.uuid4().hex}"
    args = (1, "owner", 1) if task is run_job else ()
    task.apply_async(args, task_id=task_id)
    try:
        landed = {name: [raw for raw in broker.lrange(name, 0, -1) if task_id.encode() in raw]
                  for name in ("delivery", "reevaluation", "maintenance")}
        assert [name for name, found in landed.items() if found] == [queue]
    finally:
        for name, found in landed.items():
            for raw in found:
                broker.lrem(name, 1, raw)


def test_a_task_given_a_second_different_queue_is_refused():
    taskwiring.queue_register("delivery", deliver_outbox)
    with pytest.raises(ImproperlyConfigured):
        taskwiring.queue_register("maintenance", deliver_outbox)
    assert taskwiring.queue_route(deliver_outbox.name, (), {}, {}) == {"queue": "delivery"}
