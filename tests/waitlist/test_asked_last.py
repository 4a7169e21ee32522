"""Patients who leave their offers unanswered are asked after every other candidate until they answer one (issue
22: in make simulate the patients who never reply spent most of the lead time the unfilled slots lost)."""

from __future__ import annotations

from datetime import datetime

from tests.conftest import seoul
from tests.waitlist.loop_helpers import deliver, let_expire, open_vacancy
from waitlist import services
from waitlist.models import ASKED_LAST_OFFSET, WaitlistEntry, WaitlistPolicy

LIMITS_OFF = {"contact_cap_per_day": None, "weekly_offer_cap": None, "decline_suppression_hours": 0}


def dispatch(world, starts_at):
    vacancy = open_vacancy(world, starts_at)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED", result.outcome
    deliver()
    result.offer.refresh_from_db()
    return result.offer


def unanswered_twice(world, entry, clock, days=(3, 4)) -> None:
    for day in days:
        offer = dispatch(world, seoul(day, 10))
        assert offer.entry_id == entry.pk
        let_expire(offer, clock)


def test_two_unanswered_offers_put_the_patient_after_every_other_candidate(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, **LIMITS_OFF)
    silent = world.waiting(priority_rank=5)  # the highest priority of the two
    unanswered_twice(world, silent, frozen_clock)
    silent.refresh_from_db()
    assert silent.asked_last_since is not None
    assert silent.priority_key == ASKED_LAST_OFFSET - 5
    other = world.waiting()  # lower priority, and joined later
    assert dispatch(world, seoul(5, 10)).entry_id == other.pk


def test_one_unanswered_offer_keeps_the_patient_in_their_place(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, **LIMITS_OFF)
    entry = world.waiting(priority_rank=5)
    unanswered_twice(world, entry, frozen_clock, days=(3,))
    entry.refresh_from_db()
    assert entry.asked_last_since is None
    world.waiting()
    assert dispatch(world, seoul(5, 10)).entry_id == entry.pk


def test_a_patient_asked_last_is_still_asked_when_nobody_else_fits(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, **LIMITS_OFF)
    entry = world.waiting()
    unanswered_twice(world, entry, frozen_clock)
    assert dispatch(world, seoul(5, 10)).entry_id == entry.pk


def test_an_answer_puts_the_patient_back_in_their_place(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, **LIMITS_OFF)
    entry = world.waiting(priority_rank=5)
    unanswered_twice(world, entry, frozen_clock)
    third = dispatch(world, seoul(5, 10))
    services.offer_decline(clinic=world.clinic, offer_ref=third.ref, reason="PATIENT_DECLINED")
    entry.refresh_from_db()
    assert entry.asked_last_since is None and entry.priority_key == -5
    world.waiting()
    assert dispatch(world, seoul(6, 10)).entry_id == entry.pk


def test_a_withdrawn_offer_says_nothing_of_the_patient(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, **LIMITS_OFF)
    entry = world.waiting()
    unanswered_twice(world, entry, frozen_clock)
    offer = dispatch(world, seoul(5, 10))
    services.vacancy_close(clinic=world.clinic, vacancy_ref=offer.vacancy.ref, actor=None, reason="room closed")
    entry.refresh_from_db()
    assert entry.asked_last_since is not None


def test_with_the_rule_empty_nobody_is_asked_last(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, unanswered_ask_last_after=None, **LIMITS_OFF)
    entry = world.waiting(priority_rank=5)
    unanswered_twice(world, entry, frozen_clock, days=(3, 4, 5))
    entry.refresh_from_db()
    assert entry.asked_last_since is None
    world.waiting()
    assert dispatch(world, seoul(6, 10)).entry_id == entry.pk


def test_the_rule_is_in_the_digest_and_old_versions_keep_theirs(world, monkeypatch):
    before = services.policy_current(clinic=world.clinic)
    assert before.unanswered_ask_last_after == 2
    after = services.policy_publish(clinic=world.clinic, unanswered_ask_last_after=3)
    assert after.digest() != before.digest()
    legacy = WaitlistPolicy(version=3, hold_minutes=20, min_lead_minutes=180, **WaitlistPolicy.LEGACY_VALUES)
    assert legacy.unanswered_ask_last_after is None
    digest_now = legacy.digest()
    # The digest such a version had before migration 0014, when the field did not exist.
    monkeypatch.setattr(WaitlistPolicy, "DIGEST_FIELDS", tuple(
        name for name in WaitlistPolicy.DIGEST_FIELDS if name != "unanswered_ask_last_after"))
    assert legacy.digest() == digest_now


def test_the_api_shows_since_when_an_entry_is_asked_last(world, frozen_clock, staff_api):
    services.policy_publish(clinic=world.clinic, **LIMITS_OFF)
    entry = world.waiting()
    unanswered_twice(world, entry, frozen_clock)
    body = staff_api.get(f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/{entry.ref}").json()
    since = WaitlistEntry.objects.get(pk=entry.pk).asked_last_since
    assert since is not None and datetime.fromisoformat(body["asked_last_since"]) == since
    assert body["asked_last_since"].endswith("+09:00")  # the clinic's time zone
