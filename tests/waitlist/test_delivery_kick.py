"""An offer's notice goes out on a kick, not at beat's next tick (issue 27): a dispatch that wrote a notice
queues one delivery run; a storm of dispatches queues one run while it waits; a full batch kicks the next."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from common.models import OutboxMessage, OutboxStatus
from tests.conftest import seoul
from waitlist import services, tasks


@pytest.fixture
def kicks(monkeypatch):
    sent: list[dict] = []
    monkeypatch.setattr(tasks.deliver_notices, "delay", lambda **kw: sent.append(kw))
    return sent


def cancelled_vacancy(world, hour: int):
    world.waiting()
    appointment = world.confirmed(seoul(3, hour))
    _, vacancy = services.appointment_cancel_with_vacancy(clinic=world.clinic, appointment_ref=appointment.ref,
                                                          reason="x")
    return vacancy


def test_a_dispatch_that_offers_queues_one_delivery_run_until_it_starts(world, frozen_clock, kicks):
    first, second = cancelled_vacancy(world, 10), cancelled_vacancy(world, 11)
    assert tasks.dispatch_vacancy.run(first.pk) == "OFFERED"
    assert tasks.dispatch_vacancy.run(second.pk) == "OFFERED"
    assert len(kicks) == 1  # the second offer's notice rides on the run already queued
    assert tasks.dispatch_vacancy.run(first.pk) == "ALREADY_OFFERED"
    assert len(kicks) == 1
    counts = tasks.deliver_notices.run()
    assert counts == {"SENT": 2}
    assert OutboxMessage.objects.filter(status=OutboxStatus.SENT).count() == 2
    assert cache.get(tasks.DELIVERY_KICK_KEY) is None  # cleared when the run started: the next offer kicks again
    third = cancelled_vacancy(world, 12)
    assert tasks.dispatch_vacancy.run(third.pk) == "OFFERED"
    assert len(kicks) == 2


def test_a_full_batch_kicks_the_next_run(world, frozen_clock, kicks):
    for hour in (10, 11, 12):
        assert tasks.dispatch_vacancy.run(cancelled_vacancy(world, hour).pk) == "OFFERED"
    kicks.clear()
    cache.delete(tasks.DELIVERY_KICK_KEY)
    assert tasks.deliver_notices.run(limit=2) == {"SENT": 2}
    assert len(kicks) == 1  # more may be due
    assert tasks.deliver_notices.run(limit=2) == {"SENT": 1}
    assert len(kicks) == 1


def test_nothing_offered_queues_nothing(world, frozen_clock, kicks):
    appointment = world.confirmed(seoul(3, 10))  # nobody waiting
    _, vacancy = services.appointment_cancel_with_vacancy(clinic=world.clinic, appointment_ref=appointment.ref,
                                                          reason="x")
    assert tasks.dispatch_vacancy.run(vacancy.pk) == "NO_CANDIDATE"
    assert kicks == []


def test_without_a_broker_the_dispatch_still_answers(world, frozen_clock, monkeypatch):
    def down(**_kw):
        raise OSError("broker down")

    monkeypatch.setattr(tasks.deliver_notices, "delay", down)
    assert tasks.dispatch_vacancy.run(cancelled_vacancy(world, 10).pk) == "OFFERED"  # beat's tick delivers it
