"""Dispatch offers only to a patient it can reach now: quiet hours, contact caps, the answer window
counted from delivery. Time is controlled (time-machine); nothing sleeps."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from common.errors import Conflict
from common.models import DeliveryOutcome, OutboxMessage, OutboxStatus
from common.services import outbox_enqueue
from scheduling.models import CapacityHold, HoldStatus
from tests.conftest import seoul
from tests.waitlist.loop_helpers import deliver, make_offer, open_vacancy
from waitlist import services
from waitlist.figures.panels import ops_vacancy_panel
from waitlist.models import DispatchNote, EntryStatus, Offer, OfferEvent, OfferStatus, VacancyStatus


def quiet_nights(world, **fields):
    return services.policy_publish(clinic=world.clinic, quiet_hours_start="21:00", quiet_hours_end="08:00", **fields)


def sent_notice(patient, at):
    """A notice the patient already received at ``at`` (counts against the daily contact cap)."""
    message = outbox_enqueue(topic="t", tenant_group_ref="tg", clinic_ref="cl", aggregate_ref="a", payload={},
                             recipient_ref=patient.ref)
    OutboxMessage.objects.filter(pk=message.pk).update(status=OutboxStatus.SENT, sent_at=at)


def test_a_vacancy_cancelled_at_23_is_offered_after_quiet_hours_to_the_first_candidate(world, frozen_clock):
    quiet_nights(world)
    first = world.waiting(waiting_since=seoul(1, 7))
    second = world.waiting(waiting_since=seoul(1, 8))
    frozen_clock.move_to(seoul(1, 23))
    vacancy = open_vacancy(world, seoul(3, 10))

    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "WAITING" and result.waiting.reason == "QUIET_HOURS"
    vacancy.refresh_from_db()
    assert (vacancy.status, vacancy.waiting_reason, vacancy.waiting_until) == (
        VacancyStatus.OPEN, "QUIET_HOURS", seoul(2, 8))

    # The night: beat keeps running every hour; no offer is made, so no answer window runs unseen.
    for hour in range(9):
        frozen_clock.move_to(seoul(1, 23) + timedelta(hours=hour))
        services.expire_run()
        assert services.reconcile_run()["dispatch"] == {"WAITING": 1}
    assert not Offer.objects.exists()  # nobody's chance, weekly cap or place was spent
    assert {e.status for e in (first, second)} == {EntryStatus.WAITING}
    note = DispatchNote.objects.get(vacancy=vacancy)
    assert (note.entry, note.reason_code, note.until) == (None, "QUIET_HOURS", seoul(2, 8))
    panel = ops_vacancy_panel(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert panel["waiting"]["reason"] == "QUIET_HOURS"  # staff see why it waits, and until when
    assert [(n["entry"], n["reason_code"]) for n in panel["passed_over"]] == [(None, "QUIET_HOURS")]

    frozen_clock.move_to(seoul(2, 8))  # the window opens: reconcile resumes dispatch by itself
    assert services.reconcile_run()["dispatch"] == {"OFFERED": 1}
    offer = Offer.objects.get()
    assert offer.entry_id == first.pk and offer.created_at == seoul(2, 8)
    vacancy.refresh_from_db()
    assert (vacancy.waiting_reason, vacancy.waiting_until) == ("", None)


def test_a_capped_candidate_is_passed_over_for_now_and_keeps_its_chance(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, contact_cap_per_day=1)
    capped = world.waiting(waiting_since=seoul(1, 7))
    other = world.waiting(waiting_since=seoul(1, 8))
    sent_notice(capped.patient, seoul(1, 8))
    vacancy = open_vacancy(world, seoul(3, 10))

    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == other.pk
    note = DispatchNote.objects.get(vacancy=vacancy, entry=capped)
    assert (note.reason_code, note.until) == ("CONTACT_CAP", seoul(2, 8))
    panel = ops_vacancy_panel(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert [(n["entry"], n["reason_code"]) for n in panel["passed_over"]] == [(capped.ref, "CONTACT_CAP")]
    assert not Offer.objects.filter(entry=capped).exists()  # no offer: its weekly cap is untouched

    # The cap lapses: the passed-over entry is still first in line for this very vacancy.
    services.offer_decline(clinic=world.clinic, offer_ref=result.offer.ref, reason="TIME_NOT_SUITABLE")
    frozen_clock.move_to(seoul(2, 8))
    again = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert again.outcome == "OFFERED" and again.offer.entry_id == capped.pk


def test_when_every_candidate_is_capped_the_vacancy_waits_until_the_first_cap_lapses(world):
    services.policy_publish(clinic=world.clinic, contact_cap_per_day=1)
    entry = world.waiting()
    sent_notice(entry.patient, seoul(1, 6))
    vacancy = open_vacancy(world, seoul(3, 10))
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "WAITING" and result.waiting.reason == "CONTACT_CAP"
    vacancy.refresh_from_db()
    assert (vacancy.waiting_reason, vacancy.waiting_until, vacancy.exhausted_at) == ("CONTACT_CAP", seoul(2, 6), None)


def test_a_deferred_notice_keeps_its_offer_open_and_the_window_counts_from_delivery(world, frozen_clock):
    quiet_nights(world, answer_window="FIXED")
    frozen_clock.move_to(seoul(1, 20, 55))
    offer = make_offer(world)  # made just before quiet hours: answer window 20 minutes
    frozen_clock.move_to(seoul(1, 21, 1))
    assert deliver() == {DeliveryOutcome.DEFERRED: 1}

    frozen_clock.move_to(seoul(1, 23))  # past the original expiry: the notice has not gone out
    assert services.expire_run() == {"expired": 0}
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED

    frozen_clock.move_to(seoul(2, 8))
    assert deliver() == {DeliveryOutcome.SENT: 1}
    offer.refresh_from_db()
    offer.hold.refresh_from_db()
    assert offer.notified_at == seoul(2, 8)
    assert offer.expires_at == offer.hold.expires_at == seoul(2, 8, 20)
    event = OfferEvent.objects.get(offer=offer, reason_code="NOTICE_DELIVERED")
    assert event.detail["extended"] is True
    frozen_clock.move_to(seoul(2, 8, 20))
    assert services.expire_run() == {"expired": 1}


def test_a_late_delivery_never_moves_the_window_past_the_slot_start(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, min_lead_minutes=10)
    offer = make_offer(world, starts_at=seoul(1, 9, 30), earliest=seoul(1, 0))
    assert offer.expires_at == seoul(1, 9, 20)
    frozen_clock.move_to(seoul(1, 9, 15))
    assert deliver() == {DeliveryOutcome.SENT: 1}
    offer.refresh_from_db()
    assert offer.expires_at == seoul(1, 9, 30)  # min(delivery + 20 minutes, the slot's start)


def test_only_the_first_delivery_of_a_notice_is_recorded(world, frozen_clock):
    offer = make_offer(world)
    frozen_clock.move_to(offer.created_at + timedelta(minutes=5))
    services.offer_notice_delivered(clinic=world.clinic, offer_ref=offer.ref, delivered_at=timezone.now())
    first = Offer.objects.get(pk=offer.pk)
    frozen_clock.move_to(offer.created_at + timedelta(minutes=9))
    services.offer_notice_delivered(clinic=world.clinic, offer_ref=offer.ref, delivered_at=timezone.now())
    again = Offer.objects.get(pk=offer.pk)
    assert (again.notified_at, again.expires_at, again.version) == (first.notified_at, first.expires_at,
                                                                     first.version)
    event = OfferEvent.objects.get(offer=offer, reason_code="NOTICE_DELIVERED")
    assert event.detail["late_seconds"] == 300 and event.detail["extended"] is True
    assert datetime.fromisoformat(event.detail["expires_at"]) == first.expires_at == first.hold.expires_at


def test_a_window_that_would_outgrow_an_inactive_hold_records_nothing(world, frozen_clock):
    offer = make_offer(world)
    CapacityHold.objects.filter(pk=offer.hold_id).update(status=HoldStatus.RELEASED)
    frozen_clock.move_to(offer.created_at + timedelta(minutes=5))
    with pytest.raises(Conflict):
        services.offer_notice_delivered(clinic=world.clinic, offer_ref=offer.ref, delivered_at=timezone.now())
    after = Offer.objects.get(pk=offer.pk)
    assert (after.notified_at, after.expires_at, after.version) == (None, offer.expires_at, offer.version)
    assert not OfferEvent.objects.filter(offer=offer, reason_code="NOTICE_DELIVERED").exists()


def test_quiet_hours_published_after_the_offer_hold_its_notice_back(world, frozen_clock):
    """The send window is the clinic's current policy, not the one the offer was made under."""
    frozen_clock.move_to(seoul(1, 21, 30))
    offer = make_offer(world)  # no quiet hours yet: offered at once
    quiet_nights(world)
    assert deliver() == {DeliveryOutcome.DEFERRED: 1}
    assert OutboxMessage.objects.get(aggregate_ref=offer.ref).last_error_code == "QUIET_HOURS"
