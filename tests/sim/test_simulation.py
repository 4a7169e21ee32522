"""The backfill simulator: a reproducible month, the same behaviour for every policy, a real replay."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from sim import metrics
from sim.engine import replay
from sim.generator import SCALES, generate, reply_for
from sim.models import next_send_time, run_modelled
from sim.policies import BATCH3, BROADCAST, FIFO, OURS

TINY = dataclasses.replace(SCALES["tiny"], days=2)


def test_same_seed_generates_the_same_month():
    assert generate(7, SCALES["default"]).fingerprint() == generate(7, SCALES["default"]).fingerprint()


def test_another_seed_or_clinic_generates_another_month():
    base = generate(7, SCALES["default"]).fingerprint()
    assert generate(8, SCALES["default"]).fingerprint() != base
    assert generate(7, SCALES["default"], clinic_index=1).fingerprint() != base


def test_month_has_same_day_and_overnight_cancellations():
    month = generate(3, SCALES["default"])
    leads = [b.starts_at - b.cancel_at for b in month.cancellations]
    assert any(lead < timedelta(hours=8) for lead in leads)
    assert any(timedelta(hours=8) <= lead < timedelta(hours=36) for lead in leads)


def test_a_reply_depends_only_on_seed_patient_and_slot():
    params = SCALES["default"]
    assert reply_for(1, params, "FAST", "p1", "b9") == reply_for(1, params, "FAST", "p1", "b9")
    assert reply_for(1, params, "SILENT", "p1", "b9").kind == "NONE"


def test_a_patient_offered_another_practitioner_than_named_never_accepts():
    month = generate(5, SCALES["default"])
    named = next(e for e in month.entries if e.practitioner is not None)
    other = next(b for b in month.bookings if b.practitioner != named.practitioner)
    assert month.reply(named.key, other).kind in ("DECLINE", "NONE")


def test_a_notice_due_in_quiet_hours_waits_for_their_end():
    month = generate(1, SCALES["tiny"])
    night = month.start + timedelta(hours=23)  # 23:00 local
    assert next_send_time(night, month) == month.start + timedelta(days=1, hours=8)
    noon = month.start + timedelta(hours=12)
    assert next_send_time(noon, month) == noon


def test_jain_index_is_one_for_equal_shares_and_one_over_n_for_one_winner():
    assert metrics.jain([0.5, 0.5, 0.5]) == pytest.approx(1.0)
    assert metrics.jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


@pytest.mark.parametrize("spec", [BROADCAST, BATCH3], ids=lambda s: s.name)
def test_modelled_policies_are_deterministic_and_never_notify_in_quiet_hours(spec):
    month = generate(2, SCALES["default"])
    first = metrics.compute(month, spec, run_modelled(month, spec)[0])
    assert first == metrics.compute(month, spec, run_modelled(month, spec)[0])
    assert first["quiet_hour_notices"] == 0
    assert first["vacancies"] > 0


@pytest.mark.django_db
@pytest.mark.parametrize("spec", [OURS, FIFO], ids=lambda s: s.name)
def test_replay_drives_the_real_services_and_measures_them(spec):
    from sim.adapter import enable_waitlist
    from waitlist.models import Offer, Vacancy

    enable_waitlist()
    month = generate(11, TINY)
    log, counters = replay(month, spec, f"test-{spec.name}")
    result = metrics.compute(month, spec, log)
    vacancies = Vacancy.objects.filter(clinic__name=f"Sim clinic test-{spec.name}")
    assert result["vacancies"] == vacancies.count() > 0
    assert result["offers"] == Offer.objects.filter(vacancy__in=vacancies).count()
    assert result["filled"] == vacancies.filter(status="FILLED").count()
    if spec.quiet_hours:
        assert result["quiet_hour_notices"] == 0


@pytest.mark.django_db
def test_replay_can_observe_a_shadow_policy_on_every_dispatch():
    from sim.adapter import enable_waitlist

    enable_waitlist()
    spec = dataclasses.replace(OURS, shadow={"weekly_offer_cap": 1})
    month = generate(11, TINY)
    log, _ = replay(month, spec, "test-shadow")
    assert log["shadow"]["observations"] == len(log["offers"]) > 0
    assert log["shadow"]["changes"] == {"weekly_offer_cap": 1}
