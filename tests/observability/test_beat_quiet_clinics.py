"""Beat's periodic jobs at many clinics (issue 27): a quiet clinic costs a tick no statement.

Every entry of beat's schedule (``common.taskwiring``) runs its task's body as the worker would (the follow-up tasks it
queues are stubbed), once beside one busy clinic and one quiet one, then again after six more quiet clinics
(a waiting patient, reevaluation on, nothing due): the statements sent per tick must be the same.
The beat schedule spans the apps (waitlist, reevaluation, outbox, FHIR fan-out), so the test lives with
beat's scheduler (observability)."""

from __future__ import annotations

import pytest
from celery import current_app
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.taskwiring import periodic_schedule
from reevaluation import tasks as reevaluation_tasks
from tests.reevaluation.factories import bulk_jobs, enable
from tests.waitlist.loop_helpers import make_offer
from tests.worlds import waitlist_world
from waitlist import tasks as waitlist_tasks

pytestmark = [pytest.mark.usefixtures("frozen_clock", "no_broker"), pytest.mark.django_db]


def quiet_clinic() -> None:
    world = waitlist_world()
    world.waiting()
    enable(world.clinic)


def tick(name: str) -> int:
    entry = periodic_schedule()[name]
    task = current_app.tasks[entry["task"]]
    with CaptureQueriesContext(connection) as q:
        task.run(*entry.get("args", ()), **entry.get("kwargs", {}))
    return len(q.captured_queries)


@pytest.mark.parametrize("name", sorted(periodic_schedule()))
def test_a_beat_tick_costs_no_statement_per_quiet_clinic(name, monkeypatch):
    current_app.loader.import_default_modules()
    monkeypatch.setattr(reevaluation_tasks.run_job, "delay", lambda *a, **k: None)
    monkeypatch.setattr(waitlist_tasks.deliver_notices, "delay", lambda *a, **k: None)
    busy = waitlist_world()
    make_offer(busy)
    enable(busy.clinic)
    bulk_jobs(busy.clinic, 40)  # more than a few rounds' worth: every tick below finds work
    quiet_clinic()
    tick(name)  # warm: the busy clinic's first round (its notice sent, its first jobs claimed)
    few = tick(name)
    for _ in range(6):
        quiet_clinic()
    assert tick(name) == few
