"""A patient whose last offers all went unanswered gets a short answer window (issue 22: otherwise the patients
who never reply spend every vacancy's whole window while those who answer wait); any answer ends it."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from tests.conftest import seoul
from tests.waitlist.loop_helpers import deliver, let_expire, open_vacancy
from waitlist import services
from waitlist.models import WaitlistPolicy
from waitlist.rules.windows import LEAD_TIME, WindowRule, answer_deadline, unanswered_streak, window_rule

LIMITS_OFF = {"contact_cap_per_day": None, "weekly_offer_cap": None, "decline_suppression_hours": 0}


def offer_to(world, entry, starts_at):
    vacancy = open_vacancy(world, starts_at)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == entry.pk, result.outcome
    deliver()
    result.offer.refresh_from_db()
    return result.offer


def test_the_short_window_caps_the_length_under_either_rule():
    values = {"kind": LEAD_TIME, "fixed_minutes": 20, "percent": 25, "min_minutes": 20, "max_minutes": 480,
              "margin_minutes": 60, "tz_name": "Asia/Seoul"}
    whole, short = WindowRule(**values), WindowRule(**values, unanswered_minutes=30)
    assert answer_deadline(whole, start=seoul(1, 9), slot_starts_at=seoul(3, 10)) == seoul(1, 17)
    assert answer_deadline(short, start=seoul(1, 9), slot_starts_at=seoul(3, 10)) == seoul(1, 9, 30)
    # Never longer than the rule's own window: a 20-minute fixed window stays 20 minutes.
    fixed = WindowRule(**values | {"kind": "FIXED"}, unanswered_minutes=30)
    assert answer_deadline(fixed, start=seoul(1, 9), slot_starts_at=seoul(3, 10)) == seoul(1, 9, 20)


def test_after_two_unanswered_offers_the_next_one_gets_the_short_window(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, answer_window_percent=25, answer_window_unanswered_after=2,
                            answer_window_unanswered_minutes=30, **LIMITS_OFF)
    entry = world.waiting()
    first = offer_to(world, entry, seoul(3, 10))  # made at 09:00 on the 1st, 49 h ahead: 8 h (the ceiling)
    assert first.expires_at == seoul(1, 17)
    let_expire(first, frozen_clock)
    second = offer_to(world, entry, seoul(4, 10))  # one unanswered offer: still the whole window
    assert second.expires_at == seoul(2, 1)
    let_expire(second, frozen_clock)
    third = offer_to(world, entry, seoul(5, 10))
    assert third.expires_at == seoul(2, 1, 30)  # two in a row: 30 minutes from the notice's delivery
    assert third.hold.expires_at == third.expires_at


def test_a_decline_gives_the_patient_the_whole_window_again(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, answer_window_percent=25, answer_window_unanswered_after=2,
                            answer_window_unanswered_minutes=30, **LIMITS_OFF)
    entry = world.waiting()
    for day in (3, 4):
        let_expire(offer_to(world, entry, seoul(day, 10)), frozen_clock)
    short = offer_to(world, entry, seoul(5, 10))
    assert short.expires_at == timezone.now() + timedelta(minutes=30)
    services.offer_decline(clinic=world.clinic, offer_ref=short.ref, reason="PATIENT_DECLINED")
    assert unanswered_streak(services.policy_current(clinic=world.clinic), entry.pk) == 0
    whole = offer_to(world, entry, seoul(7, 10))
    assert whole.expires_at - short.expires_at > timedelta(hours=7)


def test_other_patients_keep_the_whole_window(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, answer_window_percent=25, answer_window_unanswered_after=1,
                            answer_window_unanswered_minutes=30, **LIMITS_OFF)
    quiet, other = world.waiting(), world.waiting()
    first = offer_to(world, quiet, seoul(3, 10))  # the longer-waiting entry first
    let_expire(first, frozen_clock)
    # The quiet patient was offered that vacancy already; the other gets it with the whole window.
    offer = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=first.vacancy.ref).offer
    assert offer.entry_id == other.pk and offer.expires_at == seoul(2, 1)


def test_without_the_limit_no_history_is_read_and_every_window_is_whole(world, frozen_clock,
                                                                           django_assert_num_queries):
    policy = services.policy_publish(clinic=world.clinic, answer_window_unanswered_minutes=None, **LIMITS_OFF)
    entry = world.waiting()
    for day in (3, 4):
        let_expire(offer_to(world, entry, seoul(day, 10)), frozen_clock)
    with django_assert_num_queries(0):
        assert unanswered_streak(policy, entry.pk) == 0
    assert window_rule(policy, "Asia/Seoul", unanswered=5).unanswered_minutes is None
    third = offer_to(world, entry, seoul(5, 10))
    assert third.expires_at == timezone.now() + timedelta(hours=8)


def test_the_limit_is_in_the_digest_and_old_versions_keep_theirs(world):
    before = services.policy_current(clinic=world.clinic)
    assert before.answer_window_unanswered_minutes is None and before.answer_window_unanswered_after == 2
    after = services.policy_publish(clinic=world.clinic, answer_window_unanswered_minutes=45)
    assert after.digest() != before.digest()
    legacy = WaitlistPolicy(version=3, hold_minutes=20, min_lead_minutes=180, **WaitlistPolicy.LEGACY_VALUES)
    assert legacy.answer_window_unanswered_minutes is None  # what versions before migration 0012 ran under


def test_the_openapi_schema_describes_the_limit(db):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    fields = schema["components"]["schemas"]["PolicyChangeInput"]["properties"]
    assert "unanswered" in fields["answer_window_unanswered_minutes"]["description"]
    assert fields["answer_window_unanswered_minutes"]["nullable"] is True
    assert fields["answer_window_unanswered_after"]["minimum"] == 1
