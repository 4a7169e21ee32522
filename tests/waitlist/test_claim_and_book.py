"""Issue 11 part 5: the claim page's accept is one service, ``offer_claim_and_book`` (claim, then book
under ``confirmation=ON_ACCEPT``); the page only renders what it answers."""

from __future__ import annotations

import pytest

from common.errors import Conflict, NotFound
from scheduling.models import Appointment, AppointmentStatus, HoldStatus
from tests.waitlist.loop_helpers import make_offer
from waitlist import services
from waitlist.models import EntryStatus, Offer, OfferClaimReceipt, OfferEvent, OfferStatus


def _page_offer(offer: Offer) -> Offer:
    """The offer as the claim page reads it (with its policy, patient and clinic)."""
    return Offer.objects.select_related("clinic", "patient", "policy", "vacancy").get(pk=offer.pk)


def _events(offer: Offer) -> list[str]:
    return list(OfferEvent.objects.filter(offer=offer).order_by("id").values_list("reason_code", flat=True))


def test_on_accept_claims_and_books_in_one_call_and_a_repeat_changes_nothing(world):
    offer = make_offer(world)
    result = services.offer_claim_and_book(offer=_page_offer(offer))
    offer.refresh_from_db()
    assert result.booked and result.booking_error == "" and result.hold_ref == offer.hold.ref
    assert offer.status == OfferStatus.ACCEPTED and offer.booking_requested_at is not None
    assert offer.entry.status == EntryStatus.BOOKED
    appointment = Appointment.objects.get(patient=offer.patient, status=AppointmentStatus.CONFIRMED)
    # A double submit: the page still reads the offer as ACCEPTED; booking again is idempotent.
    again = services.offer_claim_and_book(offer=_page_offer(offer))
    assert again == result
    assert list(Appointment.objects.filter(patient=offer.patient).values_list("pk", flat=True)) == [appointment.pk]
    assert OfferClaimReceipt.objects.filter(offer=offer).count() == 1
    assert _events(offer) == ["MATCHED", "CLAIMED", "BOOKED"]


def test_under_booking_command_it_only_claims(world):
    services.policy_publish(clinic=world.clinic, confirmation="BOOKING_COMMAND")
    offer = make_offer(world)
    result = services.offer_claim_and_book(offer=_page_offer(offer))
    offer.refresh_from_db()
    assert not result.booked and result.booking_error == ""
    assert offer.status == OfferStatus.ACCEPTED and offer.booking_requested_at is None
    assert offer.hold.status == HoldStatus.ACCEPTED
    assert not Appointment.objects.filter(patient=offer.patient).exists()


def test_a_refused_booking_keeps_the_claim_and_says_why(world, monkeypatch):
    from waitlist.offers import booking

    def refuse(**kw):
        raise Conflict("no", code="HOLD_NOT_BOOKABLE")

    monkeypatch.setattr(booking, "offer_book", refuse)
    offer = make_offer(world)
    result = services.offer_claim_and_book(offer=_page_offer(offer))
    offer.refresh_from_db()
    assert not result.booked and result.booking_error == "HOLD_NOT_BOOKABLE"
    assert offer.status == OfferStatus.ACCEPTED and offer.hold.status == HoldStatus.ACCEPTED
    assert offer.booking_requested_at is not None  # reconcile finishes this booking


def test_a_closed_offer_raises_the_claims_refusal_and_writes_nothing(world):
    offer = make_offer(world)
    page_view = _page_offer(offer)
    services.offer_decline(clinic=world.clinic, offer_ref=offer.ref, patient=offer.patient)
    with pytest.raises(Conflict):
        services.offer_claim_and_book(offer=page_view)
    assert not OfferClaimReceipt.objects.filter(offer=offer).exists()
    assert not Appointment.objects.filter(patient=offer.patient).exists()


def test_another_patients_offer_looks_missing(world):
    offer = make_offer(world)
    page_view = _page_offer(offer)
    page_view.patient = world.patient()  # a page row that names someone else
    with pytest.raises(NotFound):
        services.offer_claim_and_book(offer=page_view)
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED


def test_an_accept_while_the_delivery_is_recorded_still_books(world):
    """The page read the offer; then the worker recorded the notice's delivery (a new version): the
    patient's accept is for this offer, not for a version, so it books."""
    page = _page_offer(offer := make_offer(world))
    services.offer_notice_delivered(clinic=world.clinic, offer_ref=offer.ref, delivered_at=offer.created_at)
    assert Offer.objects.get(pk=offer.pk).version == page.version + 1
    result = services.offer_claim_and_book(offer=page)
    assert result.booked
    assert Appointment.objects.filter(patient=offer.patient, status=AppointmentStatus.CONFIRMED).count() == 1


def test_an_accept_of_an_offer_that_ended_meanwhile_is_still_refused(world):
    page = _page_offer(offer := make_offer(world))
    services.offer_withdraw(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="staff took it back")
    with pytest.raises(Conflict):
        services.offer_claim_and_book(offer=page)
    assert not Appointment.objects.filter(patient=offer.patient, status=AppointmentStatus.CONFIRMED).exists()
