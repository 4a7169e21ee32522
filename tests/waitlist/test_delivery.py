"""Notification outbox for offers: end to end through real SMTP and HTTP servers, failures, skips."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta

import pytest

from common import outbox
from common.models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from scheduling.models import Appointment, AppointmentStatus
from scheduling.services.features import feature_set
from tests.conftest import assert_no_pii, race, seoul
from tests.support.servers import http_receiver, smtp_sink
from tests.waitlist.loop_helpers import (
    deliver,
    mail_text,
    make_offer,
    open_vacancy,
    page_client,
    path_from_text,
    submit,
)
from tests.worlds import waitlist_world
from waitlist import services
from waitlist.models import EntryStatus, Offer, OfferStatus


@pytest.fixture
def smtp(settings):
    with smtp_sink() as (host, port, sink):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
        yield sink


def email_clinic(world):
    world.clinic.settings = {"notification": {"provider": "email"}}
    world.clinic.save(update_fields=["settings"])


def test_cancel_offer_smtp_link_accept_confirmed(world, smtp, on_commit):
    email_clinic(world)
    patient = world.patient(email="bora@patients.example", language="en")
    world.waiting(patient)
    with on_commit(execute=True):
        vacancy = open_vacancy(world)
    offer = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer

    message = OutboxMessage.objects.get(topic="waitlist.offer_made")
    assert message.recipient_ref == patient.ref and message.payload["offer"] == offer.ref
    assert_no_pii(json.dumps(message.payload) + message.channel + message.recipient_ref, [patient])

    assert deliver() == {DeliveryOutcome.SENT: 1}
    assert smtp.received.wait(5)
    assert smtp.messages[0]["to"] == ["bora@patients.example"]
    text = mail_text(smtp.messages[0]["data"])
    assert world.clinic.name in text and world.treatment.name in text

    client = page_client()
    accepted = submit(client, path_from_text(text), "accept")
    assert accepted.status_code == 200
    assert "Your appointment is confirmed" in accepted.content.decode()  # booked at once: the page says so
    appointment = Appointment.objects.get(patient=patient)
    assert appointment.status == AppointmentStatus.CONFIRMED and appointment.starts_at == seoul(3, 10)
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED and offer.entry.status == EntryStatus.BOOKED
    attempt = OutboxAttempt.objects.get(message=message)
    assert attempt.outcome == DeliveryOutcome.SENT and attempt.provider == "email"


def test_korean_patient_gets_a_korean_message_over_the_signed_webhook(world, settings):
    patient = world.patient(phone="+821055512345", language="ko")
    with http_receiver() as (url, seen):
        world.clinic.settings = {"notification": {"provider": "webhook", "webhook_url": url}}
        world.clinic.save(update_fields=["settings"])
        make_offer(world, patient)
        assert deliver() == {DeliveryOutcome.SENT: 1}
    body = seen[0]["body"]
    expected = hmac.new(settings.NOTIFY_WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert seen[0]["headers"]["X-Signature"] == f"sha256={expected}"
    sent = json.loads(body)
    assert sent["to"] == "+821055512345" and sent["language"] == "ko"
    assert "수락" in sent["text"] and "/claim/" in sent["link"]
    assert "2030년 12월 3일" in sent["text"]  # the slot's time in the clinic's zone, Korean format


def test_provider_failing_dies_at_the_bound_and_the_offer_stays_claimable(world, settings, frozen_clock):
    settings.OUTBOX_MAX_ATTEMPTS = 3
    settings.OUTBOX_BACKOFF_SECONDS = 30
    with http_receiver([503, 503, 503]) as (url, seen):
        world.clinic.settings = {"notification": {"provider": "webhook", "webhook_url": url}}
        world.clinic.save(update_fields=["settings"])
        offer = make_offer(world, world.patient(phone="+821000000000"))
        message = OutboxMessage.objects.get()
        delays = []
        for _attempt in range(3):
            assert deliver() == {DeliveryOutcome.FAILED: 1}
            message.refresh_from_db()
            if message.status == OutboxStatus.PENDING:
                delays.append((message.next_attempt_at - seoul(1, 9)).total_seconds())
                assert deliver() == {}  # not due before its backoff
                frozen_clock.move_to(message.next_attempt_at)
    assert len(seen) == 3
    assert message.status == OutboxStatus.DEAD and message.last_error_code == "WEBHOOK_UNAVAILABLE"
    assert delays == [30, 30 + 60]  # exponential: 30 s, then 60 s after the second failure
    attempts = list(OutboxAttempt.objects.filter(message=message).order_by("attempt").values_list(
        "attempt", "outcome", "error_code"))
    assert attempts == [(n, "FAILED", "WEBHOOK_UNAVAILABLE") for n in (1, 2, 3)]
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED and offer.version == 1  # the outage changed nothing

    receipt = services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
    assert receipt.body["status"] == "ACCEPTED"


def test_after_a_dead_delivery_expiry_still_cascades(world, settings, frozen_clock, queued_dispatches, on_commit):
    settings.OUTBOX_MAX_ATTEMPTS = 1
    world.clinic.settings = {"notification": {"provider": "webhook", "webhook_url": "http://127.0.0.1:9/"}}
    world.clinic.save(update_fields=["settings"])
    second = world.waiting(world.patient(phone="+821000000001"), waiting_since=seoul(1, 8))
    offer = make_offer(world, world.patient(phone="+821000000002"), waiting_since=seoul(1, 7))
    assert deliver() == {DeliveryOutcome.FAILED: 1}
    assert OutboxMessage.objects.get().status == OutboxStatus.DEAD
    frozen_clock.move_to(offer.expires_at)
    with on_commit(execute=True):
        assert services.expire_run() == {"expired": 1}
    assert queued_dispatches == [offer.vacancy_id]
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=offer.vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == second.pk


def test_a_closed_offer_is_skipped_not_sent_and_not_counted(world, caplog):
    offer = make_offer(world)
    services.offer_decline(clinic=world.clinic, offer_ref=offer.ref)
    assert deliver() == {DeliveryOutcome.SENT: 1}
    message = OutboxMessage.objects.get(aggregate_ref=offer.ref)
    assert message.status == OutboxStatus.SENT and message.sent_at is None
    assert message.last_error_code == "OFFER_CLOSED"
    assert OutboxAttempt.objects.get(message=message).provider == "skipped"
    assert "link=" not in caplog.text  # the console provider never ran


def test_flag_off_at_send_time_skips_the_notice(world):
    make_offer(world)
    feature_set(name="waitlist", actor=None, reason="rollback", enabled=False)
    assert deliver() == {DeliveryOutcome.SENT: 1}
    assert OutboxMessage.objects.get().last_error_code == "FEATURE_OFF"


def test_console_provider_logs_the_link_and_never_the_contact(world, caplog):
    patient = world.patient(email="secret@patients.example", phone="+821099999999")
    make_offer(world, patient)
    with caplog.at_level("INFO"):
        assert deliver() == {DeliveryOutcome.SENT: 1}
    assert "/claim/" in caplog.text
    assert_no_pii(caplog.text, [patient])


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_killed_worker_lease_is_reclaimed_and_two_workers_never_send_one_attempt_twice():
    import time_machine

    from tests.waitlist.factories import NOW

    with time_machine.travel(NOW, tick=False) as clock:
        world = waitlist_world()
        with http_receiver() as (url, seen):
            world.clinic.settings = {"notification": {"provider": "webhook", "webhook_url": url}}
            world.clinic.save(update_fields=["settings"])
            offers = [
                make_offer(world, world.patient(phone=f"+8210000000{i}"), starts_at=seoul(3, 9 + i))
                for i in range(4)
            ]
            # A worker leases one message and dies (never delivers, never finishes).
            (killed,) = outbox.outbox_lease(worker="killed", limit=1, lease_seconds=60)
            clock.shift(timedelta(seconds=61))
            assert outbox.outbox_reclaim_expired() == 1

            results = race(lambda i: deliver(worker=f"w{i}", limit=2), 4)
            assert all(isinstance(r, dict) for r in results), results
            assert sum(r.get(DeliveryOutcome.SENT, 0) for r in results) == 4
            # The dead worker's late write-back is fenced off: nothing more is recorded as sent.
            assert outbox.outbox_deliver(killed) == DeliveryOutcome.FENCED
            keys = [r["headers"]["Idempotency-Key"] for r in seen]
    assert OutboxMessage.objects.filter(status=OutboxStatus.SENT).count() == 4
    sent_attempts = OutboxAttempt.objects.filter(outcome=DeliveryOutcome.SENT)
    assert sent_attempts.count() == 4
    # Every (message, attempt) has exactly one row (unique), and the reclaimed one was delivered.
    reclaimed = OutboxAttempt.objects.get(message_id=killed.id, attempt=killed.attempt)
    assert reclaimed.outcome == DeliveryOutcome.FENCED
    assert OutboxMessage.objects.get(id=killed.id).status == OutboxStatus.SENT
    # Only the fenced zombie could send twice; the live workers each sent a message once.
    assert len(set(keys)) == 4 and len(keys) == 5
    assert {o.pk for o in Offer.objects.filter(status=OfferStatus.OFFERED)} == {o.pk for o in offers}
