"""Two beats by mistake: every beat job of the schedule, sent twice per tick and run concurrently,
does each piece of work once (locks, SKIP LOCKED and compare-and-set make a second run a no-op)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
import time_machine

from common.models import OutboxAttempt, OutboxMessage, OutboxStatus
from common.outbox import outbox_deliver_due
from common.taskwiring import periodic_schedule
from config.celery import app
from observability.invariants import check
from reevaluation import tasks as reevaluation_tasks
from reevaluation.models import JobState, ReevaluationJob
from tests.conftest import race, seoul
from tests.reevaluation.factories import bulk_jobs, enable
from tests.waitlist.factories import NOW
from tests.waitlist.loop_helpers import make_offer
from tests.worlds import waitlist_world
from waitlist import tasks as waitlist_tasks
from waitlist.models import Offer, OfferEvent, OfferStatus


def beat_tick() -> None:
    """What one beat sends in one tick: every task of beat's schedule (common.taskwiring), run here and now."""
    for entry in periodic_schedule().values():
        app.tasks[entry["task"]]()


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("worker_rounds", [False, True], ids=["run_job tasks", "rounds in the worker"])
def test_two_beats_running_every_job_concurrently_do_each_thing_once(monkeypatch, settings, worker_rounds):
    settings.REEVALUATION_WORKER_ROUNDS = worker_rounds
    handed_out: list[int] = []
    monkeypatch.setattr(reevaluation_tasks.run_job, "delay", lambda job_id, owner, attempt: handed_out.append(job_id))
    monkeypatch.setattr(waitlist_tasks.dispatch_vacancy, "delay", lambda vacancy_id: None)
    with time_machine.travel(NOW, tick=False) as clock:
        worlds = [waitlist_world() for _ in range(2)]
        offers = [make_offer(world, starts_at=seoul(3, hour)) for world in worlds for hour in (10, 11, 12)]
        for world in worlds:
            enable(world.clinic)
            bulk_jobs(world.clinic, 4)
        # Notices delivered first: an undelivered notice stops an offer's answer window (issue 10), so
        # only delivered offers expire; fresh notices from the cascade are due during the race.
        outbox_deliver_due(worker="setup")
        clock.shift(timedelta(hours=9))  # every offer is past its expiry (the lead-time window: at most 8 h)

        app.loader.import_default_modules()  # register every task before the threads look them up
        results = race(lambda _beat: [beat_tick() for _tick in range(2)], 2)

    assert not [r for r in results if isinstance(r, BaseException)], results
    report = check()
    assert report.ok, report.summary()
    expired = Counter(OfferEvent.objects.filter(to_status=OfferStatus.EXPIRED).values_list("offer_id", flat=True))
    assert expired == Counter({offer.pk: 1 for offer in offers})
    assert set(Offer.objects.filter(pk__in=[o.pk for o in offers]).values_list("status", flat=True)) == {
        OfferStatus.EXPIRED}
    sent = Counter(OutboxAttempt.objects.filter(outcome="SENT").values_list("message_id", flat=True))
    messages = OutboxMessage.objects.all()
    assert messages.exclude(status=OutboxStatus.SENT).count() == 0
    assert sent == Counter({m.pk: 1 for m in messages})
    if not worker_rounds:
        assert len(handed_out) == len(set(handed_out)) == 8  # every job claimed by exactly one dispatch round
        assert ReevaluationJob.objects.filter(state=JobState.RUNNING).count() == 8
    else:  # each job claimed by one round and run once there (no CRM here: a transient failure, retried later)
        assert not handed_out
        assert list(ReevaluationJob.objects.values_list("attempts", flat=True)) == [1] * 8
        assert not ReevaluationJob.objects.filter(state=JobState.RUNNING).exists()
