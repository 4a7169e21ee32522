"""An offer's notice goes out at once, not at beat's next tick (issue 27): the dispatch task delivers the notice
its offer wrote; any other notice queues one delivery run (a storm queues one run while it waits); a full batch
kicks the next."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from common.models import OutboxMessage, OutboxStatus
from tests.conftest import seoul
from waitlist import services, tasks
from waitlist.models import OFFER_TOPIC, Offer


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


def test_a_dispatch_that_offers_delivers_its_notice_from_the_same_task(world, frozen_clock, kicks):
    vacancy = cancelled_vacancy(world, 10)
    assert tasks.dispatch_vacancy.run(vacancy.pk) == "OFFERED"
    offer = Offer.objects.get(vacancy=vacancy)
    message = OutboxMessage.objects.get(topic=OFFER_TOPIC, aggregate_ref=offer.ref)
    assert message.status == OutboxStatus.SENT and message.attempts == 1
    assert offer.notified_at is not None  # the window counts from this delivery
    assert kicks == []  # no delivery run queued for it
    assert tasks.dispatch_vacancy.run(vacancy.pk) == "ALREADY_OFFERED"
    assert OutboxMessage.objects.filter(topic=OFFER_TOPIC).count() == 1 and kicks == []


def test_the_dispatch_task_delivers_only_the_notice_its_own_offer_wrote(world, frozen_clock, kicks):
    waiting = cancelled_vacancy(world, 10)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=waiting.ref).outcome == "OFFERED"
    mine = cancelled_vacancy(world, 11)
    assert tasks.dispatch_vacancy.run(mine.pk) == "OFFERED"
    status = dict(OutboxMessage.objects.filter(topic=OFFER_TOPIC).values_list("aggregate_ref", "status"))
    assert status == {Offer.objects.get(vacancy=mine).ref: OutboxStatus.SENT,
                      Offer.objects.get(vacancy=waiting).ref: OutboxStatus.PENDING}  # left to its delivery run


def test_the_notice_of_a_dispatch_by_another_road_goes_to_one_queued_run(world, frozen_clock, kicks):
    first, second = cancelled_vacancy(world, 10), cancelled_vacancy(world, 11)
    for vacancy in (first, second):  # staff dispatch (not the task): the notice waits for a delivery run
        assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"
    tasks.kick_delivery()
    tasks.kick_delivery()
    assert len(kicks) == 1  # the second rides on the run already queued
    assert tasks.deliver_notices.run() == {"SENT": 2}
    assert cache.get(tasks.DELIVERY_KICK_KEY) is None  # cleared when the run started: the next kick queues again
    tasks.kick_delivery()
    assert len(kicks) == 2


def test_a_notice_the_dispatch_task_could_not_deliver_goes_to_a_queued_run(world, frozen_clock, kicks, monkeypatch):
    from django.db import OperationalError

    def lost(**_kw):
        raise OperationalError("connection lost")

    monkeypatch.setattr(tasks, "outbox_deliver_written", lost)
    vacancy = cancelled_vacancy(world, 10)
    assert tasks.dispatch_vacancy.run(vacancy.pk) == "OFFERED"
    assert len(kicks) == 1
    assert OutboxMessage.objects.get(topic=OFFER_TOPIC).status == OutboxStatus.PENDING
    assert tasks.deliver_notices.run() == {"SENT": 1}


def test_a_full_batch_kicks_the_next_run(world, frozen_clock, kicks):
    for hour in (10, 11, 12):
        vacancy = cancelled_vacancy(world, hour)
        assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"
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


def test_a_claim_that_books_queues_one_delivery_run_for_its_confirmation(
    world, frozen_clock, kicks, django_capture_on_commit_callbacks
):
    from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC
    from waitlist.offers.accept import offer_claim_and_book

    vacancy = cancelled_vacancy(world, 10)
    assert tasks.dispatch_vacancy.run(vacancy.pk) == "OFFERED"
    with django_capture_on_commit_callbacks(execute=True):
        offer_claim_and_book(offer=Offer.objects.get(vacancy=vacancy))
    assert len(kicks) == 1  # not left to beat's next outbox tick
    assert tasks.deliver_notices.run() == {"SENT": 1}
    assert OutboxMessage.objects.get(topic=BOOKING_CONFIRMED_TOPIC).status == OutboxStatus.SENT
