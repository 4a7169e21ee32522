"""The patient's accept on the claim page: claim, then (under ``confirmation=ON_ACCEPT``) book."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from common.errors import DomainError, VersionConflict
from common.services import new_correlation_id

from ..models import Confirmation, Offer, OfferStatus
from . import booking, offers

logger = logging.getLogger("waitlist")


@dataclass(frozen=True)
class AcceptResult:
    hold_ref: str
    booked: bool  # a CONFIRMED appointment now exists for the hold
    booking_error: str = ""  # the refusal's code when the booking step was tried and refused


def offer_claim_and_book(*, offer: Offer, correlation_id: str = "") -> AcceptResult:
    """Claim ``offer`` for its own patient and, when its policy books on accept, run the booking command.

    Two transactions on purpose: the claim stands even if booking is refused (the hold stays ACCEPTED
    with ``booking_requested_at`` set, and reconcile finishes the booking once). An offer already
    ACCEPTED (a double submit) is not claimed again; its booking is retried, which is idempotent.
    ``offer`` is the page's row (with ``policy``, ``patient``, ``clinic``); the claim re-checks it under
    its locks. Raises the claim's refusals (NotFound, Conflict); a booking refusal is returned, not raised.
    """
    correlation_id = correlation_id or new_correlation_id()
    book_now = offer.policy.confirmation == Confirmation.ON_ACCEPT
    if offer.status != OfferStatus.ACCEPTED:
        hold_ref = _claim(offer, correlation_id=correlation_id, request_booking=book_now)
    else:
        hold_ref = offer.hold.ref
    if not book_now:
        return AcceptResult(hold_ref=hold_ref, booked=False)
    try:
        booking.offer_book(clinic=offer.clinic, hold_ref=hold_ref, correlation_id=correlation_id)
    except DomainError as exc:
        # The hold stays ACCEPTED; reconcile finishes this booking once, then flags it for staff.
        logger.warning("claim page: booking of hold %s left to reconcile: %s", hold_ref, exc.code)
        return AcceptResult(hold_ref=hold_ref, booked=False, booking_error=exc.code)
    return AcceptResult(hold_ref=hold_ref, booked=True)


def _claim(offer: Offer, *, correlation_id: str, request_booking: bool) -> str:
    """The claim at the version the page read, once more at the current one if only the version moved.

    The page carries no version: the patient accepts this offer, whatever bookkeeping touched it meanwhile
    (the worker recording the notice's delivery moves the version while the patient is already answering).
    The claim's own checks still refuse an offer that ended, expired or moved on."""
    def claim(version: int) -> str:
        return offers.offer_claim(clinic=offer.clinic, offer_ref=offer.ref, expected_version=version,
                                  patient=offer.patient, correlation_id=correlation_id,
                                  request_booking=request_booking).hold_ref

    try:
        return claim(offer.version)
    except VersionConflict:
        return claim(Offer.objects.filter(pk=offer.pk).values_list("version", flat=True).get())
