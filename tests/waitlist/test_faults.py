"""Faults with real servers during dispatch and delivery; afterwards every invariant holds."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import DatabaseError, InterfaceError

from common import notify
from common.models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from common.tasks import deliver_outbox
from observability.invariants import check
from scheduling.models import CapacityHold
from tests.conftest import seoul
from tests.support.faults import backend_pid, kill_connection, reconnect
from tests.support.processes import redis_server
from tests.waitlist.factories import NOW
from tests.waitlist.loop_helpers import make_offer, open_vacancy
from waitlist import services
from waitlist.dispatch import offer_write as promotion_module
from waitlist.models import Offer, OfferEvent

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_a_connection_killed_mid_dispatch_rolls_back_and_the_retry_offers_once(world, monkeypatch):
    entry = world.waiting(world.patient())
    vacancy = open_vacancy(world)
    original = promotion_module._offer_write

    def killed_midway(*args, **kwargs):
        kill_connection(backend_pid())  # the hold rows are written, not yet committed; the offer's are next
        return original(*args, **kwargs)

    monkeypatch.setattr(promotion_module, "_offer_write", killed_midway)
    with pytest.raises((DatabaseError, InterfaceError)):
        services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    reconnect()
    assert not Offer.objects.exists() and not CapacityHold.objects.exists()
    assert check().ok
    monkeypatch.setattr(promotion_module, "_offer_write", original)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == entry.pk
    assert Offer.objects.count() == 1 and OfferEvent.objects.count() == 1
    report = check()
    assert report.ok, report.summary()


def test_redis_stopped_during_delivery_loses_and_duplicates_nothing(world, settings, monkeypatch):
    with redis_server() as redis:
        settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": redis.url}}
        first = make_offer(world, world.patient())
        second = make_offer(world, world.patient(), starts_at=seoul(4, 10))
        sent: list[str] = []
        original = notify.ConsoleProvider.send

        def send_then_stop_redis(self, notice):
            original(self, notice)
            sent.append(notice.message_ref)
            redis.stop()  # Redis (cache and broker) goes away in the middle of the delivery round

        monkeypatch.setattr(notify.ConsoleProvider, "send", send_then_stop_redis)
        deliver_outbox.run(limit=50)
        redis.start()
        monkeypatch.setattr(notify.ConsoleProvider, "send", lambda self, notice: sent.append(notice.message_ref))
        with time_machine.travel(NOW + timedelta(hours=1), tick=False):
            deliver_outbox.run(limit=50)
            deliver_outbox.run(limit=50)
    messages = OutboxMessage.objects.filter(aggregate_ref__in=[first.ref, second.ref])
    assert messages.count() == 2 and set(messages.values_list("status", flat=True)) == {OutboxStatus.SENT}
    assert len(sent) == len(set(sent)) == 2
    assert OutboxAttempt.objects.filter(outcome=DeliveryOutcome.SENT).count() == 2
    report = check()
    assert report.ok, report.summary()
