"""The backfill simulator: a reproducible month, the same behaviour for every policy, a real replay."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from sim import metrics
from sim.adapter import policy_fields
from sim.engine import replay, staff_time
from sim.generator import SCALES, Reply, generate, reply_for
from sim.models import next_send_time, run_modelled
from sim.policies import BROADCAST, FIFO, OURS, OURS_GATE_NOT_USED, OURS_NO_STANDING, OURS_TODAY, TIERED

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
    month = generate(5, SCALES["full"])
    named = next(e for e in month.entries if e.practitioner is not None)
    other = next(b for b in month.bookings if b.practitioner != named.practitioner)
    assert month.reply(named.key, other).kind in ("DECLINE", "NONE")


def test_a_notice_due_in_quiet_hours_waits_for_their_end():
    month = generate(1, SCALES["tiny"])
    night = month.start + timedelta(hours=23)  # 23:00 local
    assert next_send_time(night, month) == month.start + timedelta(days=1, hours=8)
    noon = month.start + timedelta(hours=12)
    assert next_send_time(noon, month) == noon


def test_a_patient_reads_a_night_notice_when_they_wake_and_never_replies_asleep():
    month = generate(1, SCALES["tiny"])  # 00:00 local on a Monday
    reply = Reply("ACCEPT", timedelta(minutes=10))
    assert month.answer_at(month.start + timedelta(hours=2), reply) == month.start + timedelta(hours=7, minutes=10)
    assert month.answer_at(month.start + timedelta(hours=12), reply) == month.start + timedelta(hours=12, minutes=10)
    late = Reply("DECLINE", timedelta(hours=2))  # sent 22:00, due 00:00: comes at 07:00
    assert month.answer_at(month.start + timedelta(hours=22), late) == month.start + timedelta(days=1, hours=7)


def test_staff_review_waits_for_clinic_hours():
    month = generate(1, SCALES["tiny"])  # starts on a Monday, 00:00 local
    night = month.start + timedelta(hours=20)  # Monday 20:00 → Tuesday 09:00
    assert staff_time(night, month) == month.start + timedelta(days=1, hours=9)
    morning = month.start + timedelta(hours=10)
    assert staff_time(morning, month) == morning + timedelta(minutes=month.params.staff_review_minutes)


def test_quiet_hours_cap_and_gate_are_published_as_policy_fields():
    month = generate(1, SCALES["tiny"])
    ours, fifo = policy_fields(OURS, month), policy_fields(FIFO, month)
    assert (str(ours["quiet_hours_start"]), str(ours["quiet_hours_end"])) == ("21:00:00", "08:00:00")
    assert ours["contact_cap_per_day"] == 3 and ours["decision_gate"] == "REQUIRED"
    assert fifo["quiet_hours_start"] is fifo["quiet_hours_end"] is fifo["contact_cap_per_day"] is None
    assert policy_fields(OURS_GATE_NOT_USED, month)["decision_gate"] == "NOT_USED"


def test_the_reliability_feed_misses_a_share_of_patients_the_same_way_every_run():
    month = generate(4, SCALES["default"])
    known = [month.has_decision(e.key) for e in month.entries]
    assert known == [month.has_decision(e.key) for e in month.entries]
    assert 0 < known.count(False) < len(known) / 2


def test_jain_index_is_one_for_equal_shares_and_one_over_n_for_one_winner():
    assert metrics.jain([0.5, 0.5, 0.5]) == pytest.approx(1.0)
    assert metrics.jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


@pytest.mark.parametrize("spec", [BROADCAST, TIERED], ids=lambda s: s.name)
def test_modelled_policies_are_deterministic_and_never_notify_in_quiet_hours(spec):
    month = generate(2, SCALES["default"])
    first = metrics.compute(month, spec, run_modelled(month, spec)[0])
    assert first == metrics.compute(month, spec, run_modelled(month, spec)[0])
    assert first["quiet_hour_notices"] == 0
    assert first["vacancies"] > 0


@pytest.mark.django_db
@pytest.mark.parametrize("spec", [OURS, FIFO], ids=lambda s: s.name)
def test_replay_drives_the_real_services_and_measures_them(spec):
    from common.models import OutboxMessage
    from sim.adapter import enable_waitlist
    from waitlist.models import Offer, Vacancy, WaitlistPolicy

    enable_waitlist()
    month = generate(11, TINY)
    log, counters = replay(month, spec, f"test-{spec.name}")
    result = metrics.compute(month, spec, log)
    # Every statement of the run is counted under the event kind (or set-up, wind-down) that sent it.
    assert counters["statements"] == sum(c["statements"] for c in counters["engine_cost"].values()) > 0
    assert counters["engine_cost"]["setup"]["statements"] > 0
    vacancies = Vacancy.objects.filter(clinic__name=f"Sim clinic test-{spec.name}")
    offers = Offer.objects.filter(vacancy__in=vacancies)
    assert result["vacancies"] == vacancies.count() > 0
    assert result["offers"] == offers.count() > 0
    assert result["filled"] == vacancies.filter(status="FILLED").count()
    # Notices went through the real delivery: each sent one started its offer's answer window.
    # A standing booking's one notice is its booking confirmation (the offer itself is never notified).
    booking_notices = OutboxMessage.objects.filter(topic="waitlist.booking_confirmed", sent_at__isnull=False,
                                                   payload__offer__in=list(offers.filter(standing=True)
                                                                           .values_list("ref", flat=True)))
    assert result["offers"] - result["offers_never_seen"] == (offers.filter(notified_at__isnull=False).count()
                                                             + booking_notices.count())
    policy = WaitlistPolicy.objects.filter(clinic__name=f"Sim clinic test-{spec.name}").latest("version")
    assert (policy.quiet_hours_start is not None) == spec.quiet_hours
    if spec.quiet_hours:
        assert result["quiet_hour_notices"] == 0


@pytest.mark.django_db
def test_the_same_seed_replays_to_the_same_result():
    from sim.adapter import enable_waitlist

    enable_waitlist()
    month = generate(11, TINY)
    runs = [metrics.compute(month, OURS, replay(month, OURS, f"test-repeat-{i}")[0]) for i in range(2)]
    assert runs[0] == runs[1]
    assert runs[0]["offers"] > 0


@pytest.mark.django_db
def test_replay_can_observe_a_shadow_policy_on_every_dispatch():
    from sim.adapter import enable_waitlist

    enable_waitlist()
    spec = dataclasses.replace(OURS, shadow={"weekly_offer_cap": 1})
    month = generate(11, TINY)
    log, _ = replay(month, spec, "test-shadow")
    assert log["shadow"]["observations"] == len(log["offers"]) > 0
    assert log["shadow"]["changes"] == {"weekly_offer_cap": 1}


@pytest.mark.django_db
def test_an_opt_out_revokes_consent_and_the_matcher_passes_the_patient_over():
    from scheduling.services.consent import consent_current
    from sim import adapter

    adapter.enable_waitlist()
    month = generate(11, TINY)
    world = adapter.setup(month, OURS, "test-optout")
    entry = month.entries[0]
    assert consent_current(world.patients[entry.key].pk)["EMAIL"] == "GRANTED"
    adapter.entry_add(world, entry, month.start)
    adapter.entry_opt_out(world, entry, month.start)
    assert set(consent_current(world.patients[entry.key].pk).values()) == {"REVOKED"}
    assert adapter.entry_waiting(world, entry.key)  # still on the list, but not contactable


def test_real_runs_are_queued_longest_first_each_once():
    from sim.policies import POLICIES
    from sim.run import available, expected_cost, jobs

    queue = jobs("full", [1, 2])
    real = {p.name: p for p in POLICIES if not p.modelled and available(p)}
    expected = {(name, seed, clinic, "{}") for name, spec in real.items()
                for seed in (1, 2)[: max(1, round(2 * spec.months_share))] for clinic in range(3)}
    assert sorted(queue) == sorted(expected)  # runs with a months_share on the first months only
    costs = [expected_cost(real[name]) for name, *_ in queue]
    assert costs == sorted(costs, reverse=True) and costs[0] > costs[-1]
    assert {name for name, *_ in queue[: costs.count(2)]} == {"fifo", "fifo_quiet"}  # no weekly cap: the longest


@pytest.mark.parametrize("name,marker", [("clinic_waitlist", "sim"), ("cw_sim_1", "sim"),
                                         ("clinic_waitlist_bench", "sim"), ("clinic_waitlist_sim", "bench")])
def test_scratch_databases_refuse_a_name_without_their_marker(name, marker):
    from devtools import scratchdb

    with pytest.raises(SystemExit):
        scratchdb.check_name(name, marker)
    scratchdb.check_name(f"clinic_waitlist_{marker}_r1", marker)  # a run's copy of the template is fine


@pytest.mark.parametrize("spec", [BROADCAST, TIERED], ids=lambda s: s.name)
def test_a_modelled_broadcast_keeps_the_slot_open_until_start_minus_the_margin_and_books_one_yes(spec):
    from sim.policies import MODELLED_RULES
    from sim.windows import Window

    month = generate(2, SCALES["default"])
    log, counters = run_modelled(month, spec, MODELLED_RULES)
    margin = Window(MODELLED_RULES, month.params).margin
    starts = {b.key: b.starts_at for b in month.bookings}
    assert log["offers"]
    for offer in log["offers"]:
        assert offer["closed_at"] <= starts[offer["vacancy"]] - margin
    booked = [o for o in log["offers"] if o["booked"]]
    assert len({o["vacancy"] for o in booked}) == len(booked)  # one booking per slot
    assert len({o["entry"] for o in booked}) == len(booked)  # one slot per patient
    assert counters["rules"]["standing_acceptance"] is True


def test_the_tiered_broadcast_asks_a_few_first_and_everyone_near_the_slot():
    from sim.policies import MODELLED_RULES

    month = generate(2, SCALES["default"])
    tiered, _ = run_modelled(month, TIERED, MODELLED_RULES)
    broadcast, _ = run_modelled(month, BROADCAST, MODELLED_RULES)
    starts = {b.key: b.starts_at for b in month.bookings}
    first: dict = {}
    for o in tiered["offers"]:
        if not o.get("standing"):
            first.setdefault(o["vacancy"], []).append(o["at"])
    # Far from the slot a tier is 3 patients; in the last hours before the close everyone is asked at once.
    early = {k: times for k, times in first.items() if starts[k] - min(times) > timedelta(hours=5)}
    assert early
    assert all(len([t for t in times if t == min(times)]) <= 3 for times in early.values())
    assert len(tiered["offers"]) < len(broadcast["offers"])


def test_modelled_replies_after_the_window_are_counted_not_booked():
    from sim.policies import MODELLED_RULES

    month = generate(2, SCALES["default"])
    log, counters = run_modelled(month, TIERED, MODELLED_RULES)
    assert counters["replies_after_close"] > 0
    assert all(o["closed_at"] >= o["at"] for o in log["offers"] if o["booked"])


def test_the_ceiling_is_a_share_of_the_fillable_cancellations_the_same_for_every_policy():
    month = generate(3, SCALES["default"])
    results = [metrics.compute(month, spec, run_modelled(month, spec)[0]) for spec in (BROADCAST, TIERED)]
    assert results[0]["ceiling"] == results[1]["ceiling"]
    assert 0 < results[0]["ceiling"] <= results[0]["fillable_cancellations"]


def test_fairness_reports_the_share_booked_by_responsiveness():
    month = generate(3, SCALES["default"])
    asked_only = dataclasses.replace(BROADCAST, standing_acceptance=False)  # nobody booked without an answer
    result = metrics.compute(month, asked_only, run_modelled(month, asked_only)[0])
    groups = result["fairness"]["by_responsiveness"]
    assert set(groups) == {"FAST", "SLOW", "SILENT"}
    assert sum(g["patients"] for g in groups.values()) == len(month.entries)
    assert groups["SILENT"]["booked"] == 0  # a silent patient never answers


def _result(policy: str, runs: list[tuple[int, int, int]]) -> dict:
    return {"policy": policy, "label": policy, "modelled": False,
            "runs": [{"seed": seed, "clinic": "c", "metrics": {"filled": filled, "fillable_cancellations": fillable}}
                     for seed, filled, fillable in runs]}


def test_pooled_fill_is_filled_over_fillable_summed_over_months():
    from sim.report import pooled_stats

    stats = pooled_stats([_result("fifo", [(1, 1, 10), (2, 9, 30)]), _result("ours", [(1, 5, 10), (2, 15, 30)])])
    assert stats["fifo"]["fill"]["value"] == pytest.approx(10 / 40)
    assert stats["ours"]["diff_fill"]["value"] == pytest.approx(20 / 40 - 10 / 40)


def test_a_policy_paired_with_an_identical_one_differs_by_zero_in_every_draw():
    from sim.report import pooled_stats

    months = [(seed, seed % 4, 10 + seed) for seed in range(1, 13)]
    stats = pooled_stats([_result("fifo", months), _result("ours", months)])
    assert stats["ours"]["diff_fill"]["interval"] == (0, 0)
    low, high = stats["ours"]["fill"]["interval"]
    assert low < stats["ours"]["fill"]["value"] < high


def test_every_sweep_setting_and_feature_off_run_is_a_policy_the_product_can_publish():
    from sim.policies import OURS_FIXED_WINDOW, OURS_OLD_LIMITS, sweep_specs
    from sim.run import available

    assert all(available(spec) for spec in [*sweep_specs(), OURS_FIXED_WINDOW, OURS_OLD_LIMITS, FIFO])


def test_fifo_keeps_the_peers_fixed_window_to_the_slot():
    month = generate(1, SCALES["tiny"])
    fields = policy_fields(FIFO, month)
    assert (fields["answer_window"], fields["hold_minutes"], fields["answer_window_margin_minutes"]) == ("FIXED", 20, 0)
    assert fields["min_lead_minutes"] == 180 and fields["confirmation"] == "ON_ACCEPT"


@pytest.mark.django_db
def test_the_engine_takes_each_offers_expiry_from_the_product_after_delivery():
    from sim.adapter import enable_waitlist
    from sim.engine import Replay
    from waitlist.models import Offer

    enable_waitlist()
    month = generate(11, TINY)
    engine = Replay(month, OURS, "test-expiry")
    engine.run()
    stored = dict(Offer.objects.filter(clinic__name="Sim clinic test-expiry", notified_at__isnull=False)
                  .values_list("ref", "expires_at"))
    assert stored
    assert {ref: engine.offers[ref]["expires"] for ref in stored} == stored


def test_the_standing_opt_in_and_its_notice_are_the_patients_own_draw():
    month = generate(3, SCALES["default"])
    notices = [month.standing_notice(e.key) for e in month.entries]
    assert notices == [generate(3, SCALES["default"]).standing_notice(e.key) for e in month.entries]
    assert {n for n in notices if n is not None} <= set(month.params.standing_notice_minutes)
    assert 0 < sum(n is not None for n in notices) < len(notices)
    none = generate(3, dataclasses.replace(SCALES["default"], standing_share=0.0))
    assert all(none.standing_notice(e.key) is None for e in none.entries)
    assert none.fingerprint() == month.fingerprint()  # the opt-in moves none of the month's other facts


def test_a_late_decline_never_shows_and_the_other_no_shows_are_the_same_draw_for_every_policy():
    month = generate(3, SCALES["default"])
    slot, entries = month.cancellations[0], month.entries
    assert all(month.no_show(e.key, slot, "LATE_DECLINE") for e in entries)  # no_show_late_decline 1.0
    draws = [month.no_show(e.key, slot, "ACCEPTED") for e in entries]
    assert draws == [generate(3, SCALES["default"]).no_show(e.key, slot, "ACCEPTED") for e in entries]
    assert 0 < sum(draws) < len(draws)


def test_the_ceiling_matches_each_patient_to_one_slot():
    assert metrics.max_matching({"v1": ["p1"], "v2": ["p1"], "v3": ["p1", "p2"]}) == 2
    assert metrics.max_matching({"v1": ["p1", "p2"], "v2": ["p1"]}) == 2  # augmenting: p2 takes v1, p1 v2
    month = generate(3, SCALES["default"])
    result = metrics.compute(month, BROADCAST, run_modelled(month, BROADCAST)[0])
    assert 0 < result["ceiling"] <= result["ceiling_any"] <= result["fillable_cancellations"]


def test_fifo_and_the_feature_off_run_get_no_standing_acceptance_and_the_modelled_ones_ours():
    month = generate(1, SCALES["tiny"])
    assert policy_fields(OURS, month)["standing_acceptance"] is True
    assert policy_fields(FIFO, month)["standing_acceptance"] is False
    assert policy_fields(OURS_NO_STANDING, month)["standing_acceptance"] is False
    for spec in (BROADCAST, TIERED):
        assert spec.standing_acceptance and spec.release_unacknowledged == OURS.release_unacknowledged


@pytest.mark.django_db
def test_standing_bookings_are_booked_at_once_and_a_release_is_dispatched_again_at_once(monkeypatch):
    from sim import adapter
    from sim.adapter import enable_waitlist
    from waitlist.models import Offer, OfferEvent, Vacancy

    enable_waitlist()
    # Everyone opts in at once (no minimum notice) and declines most slots: bookings, then releases.
    params = dataclasses.replace(SCALES["tiny"], standing_share=1.0, standing_notice_weights=(1.0, 0.0, 0.0),
                                 accept_share=0.1, slow_share=0.1, sms_silent_share=0.0, email_silent_share=0.0)
    month = generate(11, params)
    dispatched, dispatch = set(), adapter.dispatch

    def recorded(world, vacancy_ref, now):
        dispatched.add((vacancy_ref, now))
        return dispatch(world, vacancy_ref, now)

    monkeypatch.setattr(adapter, "dispatch", recorded)
    log, _ = replay(month, OURS, "test-standing")
    result = metrics.compute(month, OURS, log)
    clinic = "Sim clinic test-standing"
    assert result["standing_bookings"] == Offer.objects.filter(vacancy__clinic__name=clinic, standing=True).count() > 0
    released = [s for s in log["standing"] if s["released_at"] is not None]
    assert result["standing_releases"] == len(released) > 0
    # Patients read their booking notices: those who would say yes acknowledge (through the product's record),
    # those who would say no release it themselves.
    from waitlist.texts.models import BookingAck

    acknowledged = [s for s in log["standing"] if s["acknowledged_at"] is not None]
    assert result["standing_acknowledged"] == len(acknowledged) > 0
    assert BookingAck.objects.filter(offer__vacancy__clinic__name=clinic, acknowledged_at__isnull=False).count() == \
        len(acknowledged)
    assert any(s["case"] == "RELEASED" for s in log["standing"])
    assert result["filled"] == Vacancy.objects.filter(clinic__name=clinic, status="FILLED").count()
    # Each released vacancy was dispatched again at the release (the cascade the product queues after commit).
    for event in OfferEvent.objects.filter(offer__vacancy__clinic__name=clinic, reason_code="STANDING_RELEASED"):
        assert (event.offer.vacancy.ref, event.created_at) in dispatched
    assert result["filled_attended"] == result["filled"] - result["missed"]


@pytest.mark.django_db
def test_unacknowledged_automatic_bookings_are_released_by_the_product_service_and_never_attended():
    from sim.adapter import enable_waitlist
    from waitlist.models import OfferEvent

    enable_waitlist()
    # Everyone opts in and nobody reads: every automatic booking stays unacknowledged.
    params = dataclasses.replace(SCALES["tiny"], standing_share=1.0, standing_notice_weights=(1.0, 0.0, 0.0),
                                 sms_silent_share=1.0, email_silent_share=1.0)
    month = generate(11, params)
    kept = metrics.compute(month, OURS_TODAY, replay(month, OURS_TODAY, "test-unack-kept")[0])
    assert kept["standing_bookings"] > 0 and kept["standing_released_unacknowledged"] == 0
    assert kept["filled_attended"] == 0  # nobody who never read a notice comes
    log, _ = replay(month, OURS, "test-unack")
    released = metrics.compute(month, OURS, log)
    assert released["standing_released_unacknowledged"] > 0
    events = OfferEvent.objects.filter(offer__vacancy__clinic__name="Sim clinic test-unack",
                                       reason_code="STANDING_RELEASED")
    # Counted by slot: a slot booked again automatically may be released again.
    assert len({e.offer.vacancy_id for e in events}) == released["standing_released_unacknowledged"]
    assert all(e.actor != "patient" for e in events)
    # Released by the product's own job (issue #39), at the release time it stored, with its reminder sent first.
    from common.models import AuditEntry
    from waitlist.texts.models import BookingAck

    acks = BookingAck.objects.filter(offer__vacancy__clinic__name="Sim clinic test-unack", closed_code="UNACKNOWLEDGED")
    assert acks.count() == len(events) > 0
    assert all(a.released_at == a.release_at for a in acks)
    assert AuditEntry.objects.filter(action="text_ack_release").count() >= acks.count()
    assert any(m["kind"] == "REMINDER" for m in log["messages"])


def test_ours_runs_the_products_defaults_and_each_feature_off_run_one_change():
    """"Ours (as configured)" is a new clinic's policy: every field it publishes is the model's default."""
    from sim.policies import OURS_UNANSWERED_WINDOW
    from sim.run import available
    from waitlist.models import WaitlistPolicy

    defaults = {f.name: f.get_default() for f in WaitlistPolicy._meta.concrete_fields}
    month = generate(1, SCALES["tiny"])
    published = policy_fields(OURS, month)
    for name in ("weekly_offer_cap", "decline_suppression_hours", "contact_cap_per_day", "decision_gate",
                 "standing_acceptance"):
        assert published[name] == defaults[name], name
    assert not OURS.extra  # the window and the short window for unanswering patients at the model's defaults
    assert defaults["answer_window_unanswered_minutes"] is None  # off by default (measured: it cost fills)
    assert available(OURS_UNANSWERED_WINDOW)
    assert policy_fields(OURS_UNANSWERED_WINDOW, month)["answer_window_unanswered_minutes"] == 30
    assert policy_fields(FIFO, month)["answer_window_unanswered_minutes"] is None  # the peer has no such rule


def test_the_diagnosis_explains_every_unfilled_vacancy_the_ceiling_could_fill():
    from sim.diagnose import analyse

    month = generate(2, SCALES["default"])
    log, _ = run_modelled(month, TIERED)
    gap = analyse(month, TIERED, log, trace=[])
    classes = gap["classes"]
    assert gap["unfilled_with_edge"] == (classes.get("NOT_ASKED", 0) + classes.get("OFFERED_TOO_LATE", 0)
                                         + classes.get("ALL_BOOKED_ELSEWHERE", 0))
    assert gap["filled"] + gap["residual_matching"] <= gap["fillable"]
    assert metrics.max_matching(metrics.ceiling_edges(month, OURS)) == gap["ceiling"]


def test_the_modelled_release_and_reminder_are_the_product_jobs_times():
    from sim.acknowledge import ack_times, outcome
    from waitlist.texts.services.acknowledgement import ack_times as product_ack_times

    params = dataclasses.replace(SCALES["default"], sms_silent_share=1.0, email_silent_share=1.0)
    month = generate(4, params)
    slot = month.cancellations[-1]
    booked = slot.starts_at - timedelta(hours=30)
    until = booked + timedelta(hours=12)
    assert ack_times(booked, slot.starts_at, until) == product_ack_times(booked_at=booked, starts_at=slot.starts_at,
                                                                        release_until=until)
    assert ack_times(booked, slot.starts_at, None) is None  # no release deadline: the product records nothing
    fate = outcome(month, month.entries[0].key, slot, booked, booked, until, True)
    remind_at, release_at = product_ack_times(booked_at=booked, starts_at=slot.starts_at, release_until=until)
    assert fate.case == "RELEASED_UNACKNOWLEDGED" and fate.release_at == release_at < until
    assert fate.reminder_at is not None and remind_at <= fate.reminder_at < release_at


def test_a_patient_who_never_reads_is_released_under_the_job_and_unread_without_it():
    from sim.acknowledge import outcome

    params = dataclasses.replace(SCALES["default"], sms_silent_share=1.0, email_silent_share=1.0)
    month = generate(4, params)
    slot = month.cancellations[-1]
    entry = month.entries[0]
    until = slot.starts_at - timedelta(hours=3)
    sent = slot.starts_at - timedelta(hours=30)
    with_release = outcome(month, entry.key, slot, sent, sent, until, True)
    assert with_release.case == "RELEASED_UNACKNOWLEDGED" and with_release.release_at < until
    assert with_release.reminder_at is not None and with_release.reminder_at < with_release.release_at
    assert outcome(month, entry.key, slot, sent, sent, until, False).case == "UNREAD"


def test_each_patient_reads_one_channel_and_an_email_is_read_later():
    month = generate(3, SCALES["default"])
    channels = [e.channel for e in month.entries]
    assert set(channels) == {"SMS", "EMAIL"}
    assert channels == [e.channel for e in generate(3, SCALES["default"]).entries]
    fast_sms = reply_for(1, month.params, "FAST", "p1", "b9", "SMS")
    fast_email = reply_for(1, month.params, "FAST", "p1", "b9", "EMAIL")
    assert fast_email.delay == pytest.approx(fast_sms.delay * month.params.email_delay_factor, abs=timedelta(seconds=1))


def test_the_policy_neutral_ceiling_uses_no_policy_feature():
    month = generate(3, SCALES["default"])
    none = generate(3, dataclasses.replace(SCALES["default"], standing_share=0.0))
    assert metrics.ceiling_neutral(month, OURS) == metrics.ceiling_neutral(none, OURS)
    assert 0 < metrics.ceiling_neutral(month, OURS) <= len(month.cancellations)


def test_every_generator_parameter_has_a_row_and_every_cornered_assumption_a_low_and_high():
    from sim.assumptions import GROUPS, PARAMETERS, check_complete

    assert check_complete() == []
    for name, row in PARAMETERS.items():
        assert row.kind in ("SCENARIO", "POLICY", "SOURCED", "ASSUMPTION"), name
        if row.group:
            assert row.kind == "ASSUMPTION" and row.group in GROUPS, name
            assert row.low is not None and row.high is not None, name
    assert {row.group for row in PARAMETERS.values() if row.group} == set(GROUPS)


def test_a_corner_moves_only_its_groups_assumptions():
    from sim.assumptions import PARAMETERS, corner

    base = SCALES["default"]
    moved = corner(base, {"silent": "high"})
    changed = {f.name for f in dataclasses.fields(base) if getattr(base, f.name) != getattr(moved, f.name)}
    assert changed == {name for name, row in PARAMETERS.items() if row.group == "silent"}
    assert moved.sms_silent_share == PARAMETERS["sms_silent_share"].high


def _run(policy, seed, corner, attended, fillable=40):
    return {"policy": policy, "seed": seed, "clinic": "c", "corner": corner,
            "metrics": {"filled_attended": attended, "fillable_cancellations": fillable, "filled": attended}}


def test_the_pessimistic_corner_takes_each_group_at_the_side_with_the_smaller_lead():
    from sim.run import pessimistic_sides

    results = [_run("ours", 1, "silent_low", 20), _run("broadcast", 1, "silent_low", 10),
               _run("ours", 1, "silent_high", 12), _run("broadcast", 1, "silent_high", 10),
               _run("ours", 1, "slow_low", 10), _run("broadcast", 1, "slow_low", 10),
               _run("ours", 1, "slow_high", 20), _run("broadcast", 1, "slow_high", 10)]
    sides = pessimistic_sides(results, [1])
    assert sides["silent"] == "high" and sides["slow"] == "low"


def test_sensitivity_pools_each_corner_and_compares_ours_with_the_best_competitor_of_each_month():
    from sim.trust import sensitivity

    results = [_run("ours", 1, "central", 20), _run("broadcast", 1, "central", 18), _run("fifo", 1, "central", 10),
               _run("ours", 2, "central", 10), _run("broadcast", 2, "central", 8), _run("fifo", 2, "central", 12),
               _run("ours", 1, "silent_high", 12), _run("broadcast", 1, "silent_high", 14)]
    sens = sensitivity(results, [1, 2], 1)
    central = sens["corners"]["central"]
    assert central["policies"]["ours"] == {"attended": 30, "fillable": 80, "fill": 30 / 80, "filled": 30,
                                           "months": [1, 2]}
    assert central["ours_minus_best"]["points"] == pytest.approx(100 * ((20 - 18) + (10 - 12)) / 80)
    assert central["ours_minus_best"]["best"] == {"1": "broadcast", "2": "fifo"}
    assert sens["corners"]["silent_high"]["ours_minus_best"]["points"] == pytest.approx(100 * -2 / 40)


NARROW = dataclasses.replace(SCALES["tiny"], availability_any_share=0.0, availability_day_share=0.3,
                             availability_part_share=0.3, accept_share=1.0)


def test_each_patient_gets_the_products_availability_mask_from_their_own_draw():
    from waitlist.joining.availability import ANY_TIME

    month = generate(6, SCALES["default"])
    masks = [e.availability for e in month.entries]
    assert all(0 < m <= ANY_TIME for m in masks)
    assert ANY_TIME in masks and any(m != ANY_TIME for m in masks)
    narrow = generate(6, dataclasses.replace(SCALES["default"], availability_any_share=0.0))
    assert ANY_TIME not in [e.availability for e in narrow.entries]
    # The month's other facts do not move with the availability parameters.
    strip = [dataclasses.replace(e, availability=0) for e in month.entries]
    assert strip == [dataclasses.replace(e, availability=0) for e in narrow.entries]
    assert month.bookings == narrow.bookings


def test_a_patient_offered_a_time_they_cannot_come_declines():
    month = generate(6, NARROW)
    entry = next(e for e in month.entries if e.responsiveness != "SILENT")
    outside = [b for b in month.bookings if not month.available(entry.key, b.starts_at)]
    inside = [b for b in month.bookings if month.available(entry.key, b.starts_at)]
    assert outside and all(month.reply(entry.key, b).kind == "DECLINE" for b in outside)
    assert inside and all(month.reply(entry.key, b).kind == "ACCEPT" for b in inside
                          if entry.practitioner in (None, b.practitioner))


@pytest.mark.django_db
def test_fifo_offers_outside_availability_are_declined_and_ours_never_offers_outside_it():
    from sim.adapter import enable_waitlist

    enable_waitlist()
    month = generate(11, NARROW)
    bookings = month.bookings_by_key

    def outside(log):
        return [o for o in log["offers"] if not month.available(o["entry"], bookings[o["vacancy"]].starts_at)]

    fifo_log, _ = replay(month, FIFO, "test-avail-fifo")
    ignored = outside(fifo_log)
    assert ignored, "the peer's cascade should offer times some patients cannot come"
    assert not any(o["booked"] for o in ignored)
    assert all(o["status"] in ("DECLINED", "EXPIRED") for o in ignored)
    assert any(o["status"] == "DECLINED" for o in ignored)
    ours_log, _ = replay(month, OURS, "test-avail-ours")
    assert ours_log["offers"] and outside(ours_log) == []
    for spec in (BROADCAST, TIERED):
        assert outside(run_modelled(month, spec)[0]) == []


def test_the_page_reports_fill_and_attended_visits_by_channel_and_the_acknowledgement_job():
    """Issue 39 §4: ``make simulate`` reports fill and attended visits by channel, unacknowledged automatic
    bookings released and refilled, and texts per patient per week (docs/simulation.md, from sim/report.py)."""
    from pathlib import Path

    from sim.report import POOLED

    figures = {key: num for key, _, num, _, _ in POOLED}
    assert figures["filled_sms"] == "booked_by_channel.SMS" and figures["filled_email"] == "booked_by_channel.EMAIL"
    assert figures["attended_sms"] == "attended_by_channel.SMS" and figures["unack_refilled"]
    page = (Path(__file__).resolve().parents[2] / "docs" / "simulation.md").read_text(encoding="utf-8")
    for label in ("filled, text readers (÷ fillable)", "filled, e-mail readers (÷ fillable)",
                  "attended, text readers (÷ fillable)", "attended, e-mail readers (÷ fillable)",
                  "unacknowledged automatic bookings released (total)", "their slots refilled (total)",
                  "texts / patient-week p95", "**By channel (ours)**: filled by text readers"):
        assert label in page, label
