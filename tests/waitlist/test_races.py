"""Real connections racing on PostgreSQL: one vacancy, one offer, one hold, one outbox row, one winner."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection, transaction

from common.models import CommandReceipt, OutboxMessage
from scheduling.models import CapacityAllocation, CapacityHold, HoldStatus
from tests.conftest import race, seoul, token_client
from waitlist import services
from waitlist.models import EntryStatus, Offer, OfferClaimReceipt, OfferEvent, OfferStatus, WaitlistEntry

N = 16

pytestmark = [pytest.mark.race, pytest.mark.django_db(transaction=True)]


def open_vacancy(world):
    appointment = world.confirmed(seoul(3, 10))
    _, vacancy = services.appointment_cancel_with_vacancy(
        clinic=world.clinic, appointment_ref=appointment.ref, reason="cancelled"
    )
    return vacancy


def test_sixteen_dispatchers_make_exactly_one_offer(world):
    for rank in range(5):
        world.waiting(priority_rank=rank)
    vacancy = open_vacancy(world)

    results = race(lambda i: services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref), N)

    outcomes = sorted(getattr(r, "outcome", repr(r)) for r in results)
    assert outcomes == ["ALREADY_OFFERED"] * (N - 1) + ["OFFERED"], outcomes
    offer = Offer.objects.get()
    assert {r.offer.pk for r in results} == {offer.pk}  # losers read the committed offer
    assert offer.status == OfferStatus.OFFERED and offer.entry.priority_rank == 4
    assert CapacityHold.objects.count() == 1 and CapacityHold.objects.get().status == HoldStatus.ACTIVE
    assert CapacityAllocation.objects.filter(active=True, hold__isnull=False).count() == 1
    assert OutboxMessage.objects.filter(topic="waitlist.offer_made").count() == 1
    assert OfferEvent.objects.count() == 1


def offered(world):
    world.waiting()
    vacancy = open_vacancy(world)
    return services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer


def claim_url(world, offer):
    return f"/api/v1/clinics/{world.clinic.ref}/offers/{offer.ref}/claim"


def test_sixteen_identical_claims_with_one_key_accept_once_and_answer_alike(world):
    offer = offered(world)
    url = claim_url(world, offer)

    def claim(_i):
        response = token_client(world.staff).post(
            url, {"expected_version": 1}, format="json", HTTP_IDEMPOTENCY_KEY="same-key"
        )
        return response.status_code, response.content

    results = race(claim, N)
    assert all(isinstance(r, tuple) for r in results), results
    assert {status for status, _ in results} == {200}
    assert len({body for _, body in results}) == 1  # byte for byte
    body = json.loads(results[0][1])
    assert body["status"] == "ACCEPTED"
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED and offer.version == 2
    assert OfferClaimReceipt.objects.count() == 1
    assert CommandReceipt.objects.filter(command="offer_claim").count() == 1
    assert OfferEvent.objects.filter(to_status=OfferStatus.ACCEPTED).count() == 1
    assert offer.entry.status == EntryStatus.ACCEPTED and offer.hold.status == HoldStatus.ACCEPTED


def test_sixteen_claims_with_different_keys_have_one_winner_and_fifteen_conflicts(world):
    offer = offered(world)
    url = claim_url(world, offer)

    def claim(i):
        response = token_client(world.staff).post(
            url, {"expected_version": 1}, format="json", HTTP_IDEMPOTENCY_KEY=f"key-{i}"
        )
        return response.status_code, response.json()

    results = race(claim, N)
    assert all(isinstance(r, tuple) for r in results), results
    winners = [body for status, body in results if status == 200]
    losers = [body for status, body in results if status == 409]
    assert len(winners) == 1 and len(losers) == N - 1, results
    assert {body["code"] for body in losers} == {"OFFER_NOT_CLAIMABLE"}
    assert OfferClaimReceipt.objects.count() == 1
    assert OfferEvent.objects.filter(to_status=OfferStatus.ACCEPTED).count() == 1


def test_claim_racing_expiry_leaves_one_consistent_outcome(world, frozen_clock):
    offer = offered(world)
    frozen_clock.move_to(offer.expires_at)

    def worker(i):
        if i % 2:
            return services.offer_expire(clinic=world.clinic, offer_ref=offer.ref)
        return services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)

    race(worker, 8)
    offer.refresh_from_db()
    assert offer.status == OfferStatus.EXPIRED and offer.hold.status == HoldStatus.RELEASED
    assert offer.entry.status == EntryStatus.WAITING
    assert OfferEvent.objects.filter(to_status=OfferStatus.EXPIRED).count() == 1


def test_two_vacancies_racing_for_one_entry_offer_it_once(world):
    top = world.waiting(priority_rank=9)
    runner_up = world.waiting(priority_rank=1)
    vacancies = [open_vacancy(world)]
    appointment = world.confirmed(seoul(4, 10))
    vacancies.append(
        services.appointment_cancel_with_vacancy(
            clinic=world.clinic, appointment_ref=appointment.ref, reason="x"
        )[1]
    )

    results = race(
        lambda i: services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancies[i % 2].ref), 8
    )
    assert all(getattr(r, "outcome", None) in ("OFFERED", "ALREADY_OFFERED") for r in results), results
    offers = Offer.objects.filter(status=OfferStatus.OFFERED)
    assert offers.count() == 2
    assert sorted(o.entry_id for o in offers) == sorted([top.pk, runner_up.pk])  # never the same entry twice


def test_a_dispatcher_passes_over_an_entry_another_transaction_is_promoting(world):
    """No convoy: while the best entry is locked elsewhere, dispatch offers the next one at once."""
    best = world.waiting(priority_rank=9)
    runner_up = world.waiting(priority_rank=1)
    vacancy = open_vacancy(world)
    locked, release = threading.Event(), threading.Event()

    def hold_the_best_entry():
        try:
            with transaction.atomic():
                WaitlistEntry.objects.select_for_update().get(pk=best.pk)
                locked.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_best_entry)
    holder.start()
    try:
        assert locked.wait(timeout=30)
        result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    finally:
        release.set()
        holder.join(timeout=30)
    assert result.outcome == "OFFERED" and result.offer.entry_id == runner_up.pk
    best.refresh_from_db()
    assert best.status == EntryStatus.WAITING  # still first in line for the next vacancy


def test_a_late_accept_racing_dispatch_leaves_one_offer_and_keeps_or_books_the_late_yes(world, frozen_clock):
    """The patient's yes after the window and the cascade's dispatch to the next patient, on real connections:
    either the late yes books the time (the dispatch finds it filled), or the next patient is offered it and
    the yes is kept for when that offer ends. Never two active offers, never a lost yes."""
    services.policy_publish(clinic=world.clinic, contact_cap_per_day=None, weekly_offer_cap=None,
                            decline_suppression_hours=0)
    late_entry, next_entry = world.waiting(priority_rank=5), world.waiting(priority_rank=1)
    vacancy = open_vacancy(world)
    late = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer
    assert late.entry_id == late_entry.pk
    frozen_clock.move_to(late.expires_at)
    assert services.expire_run()["expired"] == 1

    def worker(i):
        if i % 2:
            return services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome
        return services.offer_late_accept(clinic=world.clinic, offer_ref=late.ref, patient=late.patient)

    results = race(worker, 8)
    assert not [r for r in results if isinstance(r, BaseException)], results
    vacancy.refresh_from_db()
    active = Offer.objects.filter(vacancy=vacancy, status__in=["OFFERED", "ACCEPTED"])
    assert active.count() == 1
    offer = active.get()
    if offer.entry_id == late_entry.pk:
        assert offer.renews_id == late.pk and vacancy.late_yes_offer_id is None
        assert all(r.offer.pk == offer.pk for r in results if not isinstance(r, str))
    else:
        assert offer.entry_id == next_entry.pk and vacancy.late_yes_offer_id == late.pk
        assert all(r.kept for r in results if not isinstance(r, str))
    assert Offer.objects.filter(renews=late).count() == (offer.entry_id == late_entry.pk)
