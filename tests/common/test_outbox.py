"""Outbox delivery: leases, fencing, backoff, the dead bound, deferral and reclaim."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from common import outbox
from common.models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from common.services import outbox_enqueue
from tests.conftest import race

TOPIC = "test.topic"


@pytest.fixture
def handler():
    """A registered handler whose behaviour the test scripts: a list of results, consumed in order."""
    script: list = []
    sent: list[str] = []

    def handle(message):
        step = script.pop(0) if script else "ok"
        if isinstance(step, Exception):
            raise step
        sent.append(message.ref)
        return "test"

    outbox.register_handler(TOPIC, handle)
    yield script, sent
    outbox._HANDLERS.pop(TOPIC, None)


def enqueue(n=1):
    return [
        outbox_enqueue(topic=TOPIC, tenant_group_ref="tg", clinic_ref="cl", aggregate_ref=f"agg{i}", payload={})
        for i in range(n)
    ]


def test_a_due_message_is_sent_once_and_its_attempt_recorded(db, handler):
    (message,) = enqueue()
    assert outbox.outbox_deliver_due(worker="w1") == {DeliveryOutcome.SENT: 1}
    assert outbox.outbox_deliver_due(worker="w1") == {}
    message.refresh_from_db()
    assert message.status == OutboxStatus.SENT and message.attempts == 1
    assert list(OutboxAttempt.objects.values_list("attempt", "outcome")) == [(1, "SENT")]
    assert handler[1] == [message.ref]


def test_failures_back_off_and_the_row_dies_at_the_bound(db, handler, settings):
    settings.OUTBOX_MAX_ATTEMPTS = 3
    script, sent = handler
    script.extend([outbox.DeliveryFailed("PROVIDER_DOWN")] * 3)
    (message,) = enqueue()
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        for expected_delay in (30, 60):
            assert outbox.outbox_deliver_due(worker="w") == {DeliveryOutcome.FAILED: 1}
            message.refresh_from_db()
            assert message.status == OutboxStatus.PENDING
            assert message.next_attempt_at == timezone.now() + timedelta(seconds=expected_delay)
            assert outbox.outbox_deliver_due(worker="w") == {}, "not due before its backoff"
            clock.shift(timedelta(seconds=expected_delay))
        assert outbox.outbox_deliver_due(worker="w") == {DeliveryOutcome.FAILED: 1}
    message.refresh_from_db()
    assert message.status == OutboxStatus.DEAD and message.last_error_code == "PROVIDER_DOWN"
    assert list(OutboxAttempt.objects.order_by("attempt").values_list("attempt", "error_code")) == [
        (1, "PROVIDER_DOWN"), (2, "PROVIDER_DOWN"), (3, "PROVIDER_DOWN")]
    assert sent == []


def test_a_crashing_handler_is_recorded_with_a_bounded_code(db, handler):
    handler[0].append(RuntimeError("secret provider text with +82105550000"))
    (message,) = enqueue()
    outbox.outbox_deliver_due(worker="w")
    message.refresh_from_db()
    assert message.last_error_code == "HANDLER_ERROR"


def test_a_deferral_does_not_spend_an_attempt(db, handler):
    until = timezone.now() + timedelta(hours=8)
    handler[0].append(outbox.DeliveryDeferred(until, "QUIET_HOURS"))
    (message,) = enqueue()
    assert outbox.outbox_deliver_due(worker="w") == {DeliveryOutcome.DEFERRED: 1}
    message.refresh_from_db()
    assert message.attempts == 0 and message.next_attempt_at == until and message.status == OutboxStatus.PENDING


def test_a_killed_workers_lease_is_reclaimed_and_its_late_result_fenced(db, handler):
    (message,) = enqueue()
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        (dead_lease,) = outbox.outbox_lease(worker="killed", lease_seconds=60)
        assert outbox.outbox_deliver_due(worker="w2") == {}, "a live lease is not taken"
        clock.shift(timedelta(seconds=61))
        assert outbox.outbox_deliver_due(worker="w2") == {DeliveryOutcome.SENT: 1}
        # The killed worker wakes up and tries to deliver its old attempt: the fence refuses.
        assert outbox.outbox_deliver(dead_lease) == DeliveryOutcome.FENCED
    message.refresh_from_db()
    assert message.status == OutboxStatus.SENT and message.attempts == 2
    outcomes = dict(OutboxAttempt.objects.values_list("attempt", "outcome"))
    assert outcomes == {1: DeliveryOutcome.FENCED, 2: DeliveryOutcome.SENT}


def test_reclaim_returns_expired_leases_to_pending(db, handler):
    (message,) = enqueue()
    outbox.outbox_lease(worker="killed", lease_seconds=1)
    assert outbox.outbox_reclaim_expired(now=timezone.now() + timedelta(seconds=5)) == 1
    message.refresh_from_db()
    assert message.status == OutboxStatus.PENDING and message.lease_owner == ""


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_workers_lease_disjoint_messages(handler):
    enqueue(40)
    leases = race(lambda i: outbox.outbox_lease(worker=f"w{i}", limit=10), 6)
    ids = [lease.id for batch in leases for lease in batch]
    assert len(ids) == len(set(ids)) == 40
    assert OutboxMessage.objects.filter(status=OutboxStatus.LEASED).count() == 40
