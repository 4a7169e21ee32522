"""The answer window: a share of the lead time between a floor and a ceiling, quiet hours not counted,
always ending the policy's margin before the slot; recorded in the offer's policy digest."""

from __future__ import annotations

import hashlib
import json
from datetime import time

import pytest

from common.errors import ValidationFailed
from tests.conftest import seoul
from tests.waitlist.loop_helpers import deliver, make_offer
from tests.waitlist.test_delivery import smtp  # noqa: F401 - the SMTP sink fixture
from waitlist import services
from waitlist.models import OfferStatus, WaitlistPolicy
from waitlist.rules.windows import FIXED, LEAD_TIME, WindowRule, answer_deadline

QUIET = {"quiet_start": time(21), "quiet_end": time(8)}


def rule(kind=LEAD_TIME, **kw) -> WindowRule:
    values = {"kind": kind, "fixed_minutes": 20, "percent": 25, "min_minutes": 20, "max_minutes": 480,
              "margin_minutes": 60, "tz_name": "Asia/Seoul"} | kw
    return WindowRule(**values)


def test_the_lead_time_window_is_a_share_of_the_time_left():
    # 10 hours before the slot: a quarter is 2.5 hours.
    assert answer_deadline(rule(), start=seoul(1, 9), slot_starts_at=seoul(1, 19)) == seoul(1, 11, 30)


def test_the_lead_time_window_has_a_floor_and_a_ceiling():
    assert answer_deadline(rule(), start=seoul(1, 9), slot_starts_at=seoul(1, 10)) == seoul(1, 9, 20)
    assert answer_deadline(rule(), start=seoul(1, 9), slot_starts_at=seoul(8, 9)) == seoul(1, 17)


def test_every_window_ends_the_margin_before_the_slot():
    # The floor (20 min) would end 20 minutes before the slot; the 60-minute margin ends it earlier.
    assert answer_deadline(rule(min_minutes=120), start=seoul(1, 9), slot_starts_at=seoul(1, 11, 30)) == (
        seoul(1, 10, 30))


def test_a_margin_the_time_left_cannot_honour_ends_the_window_at_the_slot():
    assert answer_deadline(rule(), start=seoul(1, 9), slot_starts_at=seoul(1, 9, 30)) == seoul(1, 9, 20)


def test_the_fixed_window_is_the_hold_minutes_whatever_the_lead():
    assert answer_deadline(rule(FIXED), start=seoul(1, 9), slot_starts_at=seoul(8, 9)) == seoul(1, 9, 20)


def test_quiet_hours_do_not_count_against_the_window():
    # 20:30 with a two-hour window: 30 minutes before 21:00, the other 90 after 08:00.
    two_hours = rule(min_minutes=120, max_minutes=120, **QUIET)
    assert answer_deadline(two_hours, start=seoul(1, 20, 30), slot_starts_at=seoul(3, 10)) == seoul(2, 9, 30)


def test_a_window_that_spans_several_nights_skips_each_of_them():
    long = rule(min_minutes=24 * 60, max_minutes=24 * 60, **QUIET)  # 09:00-21:00, then 12 h from 08:00
    assert answer_deadline(long, start=seoul(1, 9), slot_starts_at=seoul(9, 9)) == seoul(2, 20)


def test_the_fixed_window_also_stops_for_the_night():
    assert answer_deadline(rule(FIXED, **QUIET), start=seoul(1, 20, 50), slot_starts_at=seoul(3, 10)) == (
        seoul(2, 8, 10))


def test_an_offer_made_before_quiet_hours_stays_open_overnight_and_ends_next_morning(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, quiet_hours_start="21:00", quiet_hours_end="08:00",
                            answer_window_min_minutes=120, answer_window_max_minutes=120)
    frozen_clock.move_to(seoul(1, 20, 30))
    offer = make_offer(world)  # the slot is on the 3rd at 10:00
    deliver()
    offer.refresh_from_db()
    offer.hold.refresh_from_db()
    assert offer.expires_at == offer.hold.expires_at == seoul(2, 9, 30)
    frozen_clock.move_to(seoul(2, 3))
    assert services.expire_run() == {"expired": 0}
    frozen_clock.move_to(seoul(2, 9, 30))
    assert services.expire_run() == {"expired": 1}
    offer.refresh_from_db()
    assert offer.status == OfferStatus.EXPIRED


def test_the_offer_records_the_window_rule_in_its_policy_digest(world):
    before = services.policy_current(clinic=world.clinic)
    after = services.policy_publish(clinic=world.clinic, answer_window_percent=50)
    assert after.digest() != before.digest()
    offer = make_offer(world)
    assert offer.policy_digest == after.digest()


def test_a_version_at_the_legacy_values_keeps_the_digest_it_had_before_the_window_fields():
    policy = WaitlistPolicy(version=3, hold_minutes=20, min_lead_minutes=180, **WaitlistPolicy.LEGACY_VALUES)
    legacy = set(WaitlistPolicy.LEGACY_VALUES)
    old_fields = [name for name in WaitlistPolicy.DIGEST_FIELDS if name not in legacy]
    canonical = json.dumps({k: getattr(policy, k) for k in old_fields}, sort_keys=True, default=str)
    assert policy.digest() == hashlib.sha256(canonical.encode()).hexdigest()


def test_a_window_floor_above_its_ceiling_is_refused(world):
    with pytest.raises(ValidationFailed):
        services.policy_publish(clinic=world.clinic, answer_window_min_minutes=600, answer_window_max_minutes=60)
    assert services.policy_current(clinic=world.clinic).version == 1


def test_a_notice_held_back_overnight_states_the_deadline_its_delivery_sets(world, frozen_clock, smtp):
    from tests.waitlist.loop_helpers import mail_text
    from tests.waitlist.test_delivery import email_clinic

    email_clinic(world)
    services.policy_publish(clinic=world.clinic, quiet_hours_start="21:00", quiet_hours_end="08:00",
                            answer_window_min_minutes=120, answer_window_max_minutes=120)
    frozen_clock.move_to(seoul(1, 20, 55))
    offer = make_offer(world, world.patient(email="bora@patients.example", language="en"))
    frozen_clock.move_to(seoul(1, 21, 1))
    deliver()  # quiet hours: deferred
    frozen_clock.move_to(seoul(2, 8))
    deliver()
    assert smtp.received.wait(5)
    offer.refresh_from_db()
    assert offer.expires_at == seoul(2, 10)  # two hours from the delivery at 08:00
    assert "Dec. 2, 2030, 10 a.m." in mail_text(smtp.messages[0]["data"])
