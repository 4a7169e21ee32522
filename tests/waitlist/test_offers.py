"""Claim, decline, expiry, withdrawal, booking and the decision policy, at the service level."""

from __future__ import annotations

from datetime import timedelta

import pytest

from common.errors import Conflict, NotFound, SlotOccupied, VersionConflict
from common.timefmt import iso_in_zone
from scheduling.models import CapacityAllocation, CapacityHold, HoldStatus
from scheduling.services import appointment_book
from tests.conftest import seoul
from tests.waitlist.factories import NOW, decide
from waitlist import services
from waitlist.models import (
    DecisionStatus,
    EntryStatus,
    NonFreshAction,
    Offer,
    OfferEvent,
    OfferStatus,
    Vacancy,
    VacancyStatus,
)
from waitlist.reliability.feed import Decision, StoredDecisionProvider, set_decision_provider


def open_vacancy(world, starts_at=None, patient=None):
    appointment = world.confirmed(starts_at or seoul(3, 10), patient=patient)
    _, vacancy = services.appointment_cancel_with_vacancy(
        clinic=world.clinic, appointment_ref=appointment.ref, reason="cancelled"
    )
    assert vacancy is not None
    return vacancy


def dispatch(world, vacancy):
    return services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)


def offered(world, starts_at=None, **entry_kw):
    entry = world.waiting(**entry_kw)
    vacancy = open_vacancy(world, starts_at)
    result = dispatch(world, vacancy)
    assert result.outcome == "OFFERED", result
    return vacancy, entry, result.offer


def claim(world, offer, version=1, **kw):
    return services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=version, **kw)


def code_of(excinfo) -> str:
    return excinfo.value.code


# --- claim -------------------------------------------------------------------------------------


def test_claim_accepts_offer_hold_and_entry_and_stores_a_receipt(world):
    vacancy, entry, offer = offered(world)
    receipt = claim(world, offer)
    offer.refresh_from_db()
    entry.refresh_from_db()
    hold = CapacityHold.objects.get(pk=offer.hold_id)
    assert (offer.status, offer.version) == (OfferStatus.ACCEPTED, 2)
    assert entry.status == EntryStatus.ACCEPTED and hold.status == HoldStatus.ACCEPTED
    assert receipt.body["hold"] == hold.ref and receipt.body["status"] == "ACCEPTED"
    assert receipt.body["hold_expires_at"] == iso_in_zone(hold.expires_at, "Asia/Seoul")
    assert hold.expires_at == NOW + timedelta(minutes=20)


def test_a_double_submit_without_a_key_returns_the_same_receipt(world):
    _, _, offer = offered(world)
    first = claim(world, offer)
    second = claim(world, offer)  # the page submits again with the version it showed
    assert second.pk == first.pk and second.body == first.body


def test_a_claim_with_another_key_after_success_is_not_claimable(world):
    _, _, offer = offered(world)
    claim(world, offer, idempotency_key="one")
    with pytest.raises(Conflict) as info:
        claim(world, offer, idempotency_key="two")
    assert code_of(info) == "OFFER_NOT_CLAIMABLE"


def test_claim_at_expires_at_is_expired_inclusive(world, frozen_clock):
    _, _, offer = offered(world)
    frozen_clock.move_to(offer.expires_at - timedelta(microseconds=1))
    claim(world, offer)  # one microsecond before: fine
    _, _, late = offered(world, seoul(4, 10))
    frozen_clock.move_to(late.expires_at)
    with pytest.raises(Conflict) as info:
        claim(world, late)
    assert code_of(info) == "OFFER_EXPIRED"
    late.refresh_from_db()
    assert late.status == OfferStatus.OFFERED  # the refusal changed nothing; expiry is the job's


def test_claim_with_a_stale_version_is_a_version_conflict_and_changes_nothing(world):
    _, entry, offer = offered(world)
    with pytest.raises(VersionConflict):
        claim(world, offer, version=5)
    offer.refresh_from_db()
    entry.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED and offer.version == 1 and entry.status == EntryStatus.OFFERED


def test_stale_copy_cas_cannot_overwrite_a_newer_row(world):
    """The CAS itself refuses a stale in-memory copy even if a caller skipped the checks."""
    from common.cas import cas_update

    _, _, offer = offered(world)
    stale = Offer.objects.get(pk=offer.pk)
    Offer.objects.filter(pk=offer.pk).update(version=2)
    with pytest.raises(VersionConflict):
        cas_update(stale, expected_status=OfferStatus.OFFERED, status=OfferStatus.ACCEPTED)


def test_an_offer_of_another_clinic_is_not_found(world):
    from tests.worlds import waitlist_world

    _, _, offer = offered(world)
    elsewhere = waitlist_world()
    with pytest.raises(NotFound):
        services.offer_claim(clinic=elsewhere.clinic, offer_ref=offer.ref, expected_version=1)
    with pytest.raises(NotFound):
        claim(world, offer, patient=world.patient())  # someone else's offer looks missing too


def test_claim_after_the_decision_went_stale_is_decision_stale(world):
    _, entry, offer = offered(world)
    decide(entry.patient, DecisionStatus.STALE, ref="newer-stale")
    with pytest.raises(Conflict) as info:
        claim(world, offer)
    assert code_of(info) == "DECISION_STALE"


def test_claim_when_the_hold_lost_its_slot_is_slot_occupied(world):
    _, _, offer = offered(world)
    CapacityAllocation.objects.filter(hold_id=offer.hold_id).update(active=False)
    with pytest.raises(SlotOccupied):
        claim(world, offer)


# --- decline, expiry, withdrawal ---------------------------------------------------------------


def test_decline_releases_the_hold_suppresses_and_cascades(world, queued_dispatches, on_commit):
    second = world.waiting(waiting_since=NOW + timedelta(seconds=1))
    vacancy, entry, offer = offered(world, waiting_since=NOW)
    assert offer.entry_id == entry.pk
    queued_dispatches.clear()
    with on_commit(execute=True):
        services.offer_decline(clinic=world.clinic, offer_ref=offer.ref, reason="busy")
    offer.refresh_from_db()
    entry.refresh_from_db()
    assert offer.status == OfferStatus.DECLINED and offer.hold.status == HoldStatus.RELEASED
    assert entry.status == EntryStatus.WAITING and entry.suppressed_until == NOW + timedelta(
        hours=services.policy_current(clinic=world.clinic).decline_suppression_hours)
    assert not CapacityAllocation.objects.filter(hold_id=offer.hold_id, active=True).exists()
    assert queued_dispatches == [vacancy.pk]
    nxt = dispatch(world, vacancy)
    assert nxt.outcome == "OFFERED" and nxt.offer.entry_id == second.pk
    # The decliner is suppressed for other vacancies too.
    other = open_vacancy(world, seoul(4, 10))
    assert dispatch(world, other).outcome == "NO_CANDIDATE"


def test_expiry_job_expires_due_offers_only_and_cascades(world, frozen_clock, queued_dispatches, on_commit):
    vacancy, entry, offer = offered(world)
    assert services.offers_expire_due() == 0
    frozen_clock.move_to(offer.expires_at)
    with on_commit(execute=True):
        assert services.offers_expire_due() == 1
    offer.refresh_from_db()
    entry.refresh_from_db()
    assert offer.status == OfferStatus.EXPIRED and entry.status == EntryStatus.WAITING
    assert offer.hold.status == HoldStatus.RELEASED and vacancy.pk in queued_dispatches
    with pytest.raises(Conflict) as info:
        claim(world, offer, version=2)
    assert code_of(info) == "OFFER_EXPIRED"
    assert services.offers_expire_due() == 0  # a second tick is harmless


def test_staff_withdraw_of_an_accepted_offer_releases_the_hold(world, queued_dispatches, on_commit):
    vacancy, entry, offer = offered(world)
    claim(world, offer)
    with on_commit(execute=True):
        services.offer_withdraw(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="dup")
    offer.refresh_from_db()
    entry.refresh_from_db()
    assert offer.status == OfferStatus.WITHDRAWN and offer.hold.status == HoldStatus.RELEASED
    assert entry.status == EntryStatus.WAITING and vacancy.pk in queued_dispatches
    events = OfferEvent.objects.filter(offer=offer, reason_code="STAFF_WITHDRAWN", actor=world.staff.username)
    assert events.exists()


def test_entry_withdraw_takes_back_its_open_offer(world):
    vacancy, entry, offer = offered(world)
    services.entry_withdraw(clinic=world.clinic, entry_ref=entry.ref, actor=world.staff, reason="moved away")
    offer.refresh_from_db()
    entry.refresh_from_db()
    assert entry.status == EntryStatus.WITHDRAWN and offer.status == OfferStatus.WITHDRAWN
    assert offer.hold.status == HoldStatus.RELEASED
    again = services.entry_withdraw(clinic=world.clinic, entry_ref=entry.ref, actor=world.staff, reason="x")
    assert again.version == entry.version  # no-op


def test_event_log_is_append_only(world):
    _, _, offer = offered(world)
    event = OfferEvent.objects.get(offer=offer)
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        OfferEvent.objects.filter(pk=event.pk).update(reason_code="X")
    with pytest.raises(TypeError):
        OfferEvent.objects.all().delete()


# --- booking -----------------------------------------------------------------------------------


def test_booking_an_offered_hold_is_refused_and_changes_nothing(world):
    _, entry, offer = offered(world)
    with pytest.raises(Conflict) as info:
        services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref)
    assert code_of(info) == "HOLD_NOT_BOOKABLE"
    assert CapacityHold.objects.get(pk=offer.hold_id).status == HoldStatus.ACTIVE


def test_a_failed_booking_leaves_the_hold_accepted_for_reconcile(world, frozen_clock):
    vacancy, entry, offer = offered(world)
    receipt = claim(world, offer)
    hold = CapacityHold.objects.get(ref=receipt.hold_ref)
    frozen_clock.move_to(hold.expires_at)
    with pytest.raises(Conflict) as info:
        services.offer_book(clinic=world.clinic, hold_ref=hold.ref)
    assert code_of(info) == "HOLD_NOT_BOOKABLE"
    hold.refresh_from_db()
    entry.refresh_from_db()
    vacancy.refresh_from_db()
    assert hold.status == HoldStatus.ACCEPTED and entry.status == EntryStatus.ACCEPTED
    assert vacancy.status == VacancyStatus.OPEN


def test_booking_is_idempotent(world):
    vacancy, entry, offer = offered(world)
    claim(world, offer)
    first, created = services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref)
    again, created_again = services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref)
    assert created and not created_again and first.pk == again.pk
    assert OfferEvent.objects.filter(offer=offer, reason_code="BOOKED").count() == 1


# --- dispatch outcomes and the decision policy -------------------------------------------------


def test_a_directly_booked_slot_closes_the_vacancy(world):
    world.waiting()
    vacancy = open_vacancy(world)
    appointment_book(
        clinic=world.clinic,
        patient=world.patient(),
        practitioner=world.doctor,
        treatment=world.treatment,
        starts_at=seoul(3, 10),
        status="CONFIRMED",
    )
    result = dispatch(world, vacancy)
    vacancy.refresh_from_db()
    assert result.outcome == "CLOSED" and vacancy.status == VacancyStatus.CLOSED
    assert vacancy.close_reason == "SLOT_TAKEN" and not Offer.objects.exists()
    assert CapacityHold.objects.count() == 0


def test_a_started_vacancy_closes(world, frozen_clock):
    world.waiting()
    vacancy = open_vacancy(world)
    frozen_clock.move_to(vacancy.starts_at)
    assert dispatch(world, vacancy).outcome == "CLOSED"


def test_stale_decision_goes_to_staff_review_by_default(world):
    stale = world.waiting(fresh=False, priority_rank=10)
    decide(stale.patient, DecisionStatus.STALE, rank=10)  # a decision's rank is the entry's rank
    world.waiting(priority_rank=1)
    vacancy = open_vacancy(world)
    assert dispatch(world, vacancy).outcome == "STAFF_REVIEW"
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.REVIEW and vacancy.review_entry_id == stale.pk
    assert not Offer.objects.exists()


def test_an_expired_fresh_decision_counts_as_stale(world):
    entry = world.waiting(fresh=False)
    decide(entry.patient, DecisionStatus.FRESH, expires_at=NOW)  # expires exactly now
    assert dispatch(world, open_vacancy(world)).outcome == "STAFF_REVIEW"


def test_next_candidate_policy_skips_a_stale_decision(world):
    services.policy_publish(clinic=world.clinic, stale_action=NonFreshAction.NEXT_CANDIDATE)
    stale = world.waiting(fresh=False, priority_rank=10)
    decide(stale.patient, DecisionStatus.STALE)
    fresh = world.waiting(priority_rank=1)
    result = dispatch(world, open_vacancy(world))
    assert result.outcome == "OFFERED" and result.offer.entry_id == fresh.pk
    assert result.offer.policy_version == 2
    assert result.offer.policy_digest == services.policy_current(clinic=world.clinic).digest()


def test_missing_decision_is_unavailable_and_follows_its_own_policy(world):
    services.policy_publish(clinic=world.clinic, unavailable_action=NonFreshAction.NEXT_CANDIDATE)
    world.waiting(fresh=False, priority_rank=10)
    assert dispatch(world, open_vacancy(world)).outcome == "NO_CANDIDATE"


def test_fresh_read_policy_asks_the_provider_again(world):
    services.policy_publish(clinic=world.clinic, stale_action=NonFreshAction.FRESH_READ)
    entry = world.waiting(fresh=False)
    decide(entry.patient, DecisionStatus.STALE)

    class Provider(StoredDecisionProvider):
        reads: list[int] = []

        def fresh_read(self, *, clinic, patient_id):
            self.reads.append(patient_id)
            return Decision("fresh-read-1", DecisionStatus.FRESH, 0, NOW + timedelta(hours=1))

    previous = set_decision_provider(Provider())
    try:
        result = dispatch(world, open_vacancy(world))
    finally:
        set_decision_provider(previous)
    assert result.outcome == "OFFERED" and result.offer.decision_ref == "fresh-read-1"
    assert Provider.reads == [entry.patient_id]


def test_fresh_read_that_is_still_stale_goes_to_review(world):
    services.policy_publish(clinic=world.clinic, stale_action=NonFreshAction.FRESH_READ)
    entry = world.waiting(fresh=False)
    decide(entry.patient, DecisionStatus.STALE)
    assert dispatch(world, open_vacancy(world)).outcome == "STAFF_REVIEW"


def test_policy_default_is_made_from_the_clinic_once(world):
    first = services.policy_current(clinic=world.clinic)
    assert (first.version, first.hold_minutes, first.min_lead_minutes) == (1, 20, 180)
    assert services.policy_current(clinic=world.clinic).pk == first.pk
    assert Vacancy.objects.count() == 0
