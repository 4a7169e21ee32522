"""Fairness reads (waitlist/figures/fairness.py): wait reduction, pass-overs by reason, the forgotten longest
waiters."""

from __future__ import annotations

import json
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import assert_no_pii, seoul
from tests.waitlist.loop_helpers import open_vacancy
from waitlist import services
from waitlist.figures.fairness import fairness_metrics

URL = "/api/v1/ops/waitlist"


def dispatch(world, vacancy):
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED", result.outcome
    return result.offer


def test_a_higher_band_offered_first_passes_over_the_longer_waiter_for_priority(world, frozen_clock):
    early = world.waiting(waiting_since=seoul(1, 9) - timedelta(days=30))
    urgent = world.waiting(priority_rank=2)
    offer = dispatch(world, open_vacancy(world))
    assert offer.entry_id == urgent.pk
    passovers = fairness_metrics(clinic=world.clinic)["passovers"]
    assert passovers["by_reason"]["PRIORITY"] == {"passovers": 1, "entries": 1}
    assert passovers["total"] == 1
    assert early.pk != offer.entry_id


def test_a_named_practitioner_request_passes_over_an_any_practitioner_waiter_for_slot_fit(world, frozen_clock):
    world.waiting(waiting_since=seoul(1, 9) - timedelta(days=30))
    named = world.waiting(practitioner=world.doctor)
    offer = dispatch(world, open_vacancy(world))
    assert offer.entry_id == named.pk
    assert fairness_metrics(clinic=world.clinic)["passovers"]["by_reason"]["SLOT_FIT"]["passovers"] == 1


def test_the_first_in_line_being_offered_is_no_pass_over(world, frozen_clock):
    world.waiting(waiting_since=seoul(1, 9) - timedelta(days=30))
    world.waiting()
    dispatch(world, open_vacancy(world))
    assert fairness_metrics(clinic=world.clinic)["passovers"]["total"] == 0


def test_a_booking_counts_as_wait_reduction_in_its_band_and_quartile(world, frozen_clock):
    world.waiting(waiting_since=seoul(1, 9) - timedelta(days=30))
    urgent = world.waiting(priority_rank=2, latest=seoul(13, 10))
    offer = dispatch(world, open_vacancy(world, seoul(3, 10)))
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
    services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref)
    reduction = fairness_metrics(clinic=world.clinic)["wait_reduction"]
    band2 = next(g for g in reduction["by_band"] if g["band"] == 2)
    assert band2 == {"band": 2, "entries": 1, "booked": 1, "waited_days_p50": 0.0, "days_sooner_p50": 10.0,
                     "days_sooner_per_entry": 10.0}
    band0 = next(g for g in reduction["by_band"] if g["band"] == 0)
    assert band0["booked"] == 0 and band0["entries"] == 1 and band0["waited_days_p50"] == 30.0
    assert sum(q["booked"] for q in reduction["by_wait_quartile"]) == 1
    assert urgent.pk == offer.entry_id


def test_longest_waiting_without_offer_lists_eligible_entries_by_ref(world, frozen_clock):
    forgotten = world.waiting(waiting_since=seoul(1, 9) - timedelta(days=40))
    world.waiting(priority_rank=3)
    dispatch(world, open_vacancy(world))
    rows = fairness_metrics(clinic=world.clinic)["longest_waiting_without_offer"]
    assert [r["entry"] for r in rows] == [forgotten.ref]
    assert rows[0]["patient"] == forgotten.patient.ref
    assert rows[0]["eligible_vacancies"] == 1 and rows[0]["waiting_days"] == 40.0


def test_an_entry_that_fits_no_vacancy_is_not_listed_as_forgotten(world, frozen_clock):
    world.waiting(waiting_since=seoul(1, 9) - timedelta(days=40), earliest=seoul(20, 0), latest=seoul(25, 0))
    open_vacancy(world)
    assert fairness_metrics(clinic=world.clinic)["longest_waiting_without_offer"] == []


def _queries(world) -> int:
    with CaptureQueriesContext(connection) as captured:
        fairness_metrics(clinic=world.clinic)
    return len(captured.captured_queries)


def test_query_count_does_not_grow_with_the_waitlist(world, frozen_clock):
    for _ in range(3):
        world.waiting()
    dispatch(world, open_vacancy(world, seoul(3, 10)))
    small = _queries(world)
    for i in range(30):
        world.waiting(priority_rank=i % 3, waiting_since=seoul(1, 9) - timedelta(days=i))
    dispatch(world, open_vacancy(world, seoul(4, 10)))
    assert _queries(world) == small == 3


def test_ops_api_carries_fairness_without_patient_data(world, staff_api, frozen_clock):
    world.waiting(waiting_since=seoul(1, 9) - timedelta(days=30))
    world.waiting(priority_rank=2)
    dispatch(world, open_vacancy(world))
    body = staff_api.get(URL, {"clinic": world.clinic.ref}).json()
    fairness = body["fairness"]
    assert fairness["passovers"]["by_reason"]["PRIORITY"]["passovers"] == 1
    assert set(fairness) == {"window_days", "wait_reduction", "passovers", "longest_waiting_without_offer",
                             "computed_at"}
    assert_no_pii(json.dumps(body), list(world.clinic.patients.all()))
