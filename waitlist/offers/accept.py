"""The patient's accept on the claim page: claim (or, after the window, a late accept), then (under
``confirmation=ON_ACCEPT``) book."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.utils import timezone

from common.errors import DomainError, VersionConflict
from common.services import new_correlation_id
from waitlist.dispatch.fence import DispatchResult
from waitlist.models import Confirmation, Offer, OfferStatus
from waitlist.offers import booking, offers
from waitlist.offers.late_accept import LateAccept, late_yes_drop, offer_late_accept
from waitlist.policy.services import policy_current

logger = logging.getLogger("waitlist")


@dataclass(frozen=True)
class AcceptResult:
    hold_ref: str
    booked: bool  # a CONFIRMED appointment now exists for the hold
    booking_error: str = ""  # the refusal's code when the booking step was tried and refused
    appointment_ref: str = ""  # the CONFIRMED appointment, when booked here


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
    return _book(offer, hold_ref, book_now=book_now, correlation_id=correlation_id)


def offer_late_accept_and_book(*, clinic, offer_ref: str, patient=None, actor=None, correlation_id: str = "",
                               now=None, system_label: str = "") -> tuple[LateAccept, AcceptResult]:
    """An accept of an offer that ended unanswered while its time is still free (``late_accept.offer_late_accept``:
    a new offer, claimed), then, under ``confirmation=ON_ACCEPT``, the booking as for any accept. The claim page
    passes its ``patient``, the API its ``actor``. A yes kept while the time is offered to someone else books
    nothing yet (``LateAccept.kept``). Raises the late accept's refusals (NotFound, Conflict); a booking refusal
    is returned, not raised (reconcile finishes the booking)."""
    correlation_id = correlation_id or new_correlation_id()
    book_now = policy_current(clinic=clinic).confirmation == Confirmation.ON_ACCEPT
    renewed = offer_late_accept(clinic=clinic, offer_ref=offer_ref, patient=patient, actor=actor, now=now,
                                correlation_id=correlation_id, request_booking=book_now, system_label=system_label)
    if renewed.kept:
        return renewed, AcceptResult(hold_ref="", booked=False)
    return renewed, _book(renewed.offer, renewed.offer.hold.ref, book_now=book_now, correlation_id=correlation_id,
                          actor=actor, now=now)


def late_yes_take_up(vacancy, *, now=None, correlation_id: str = "") -> DispatchResult | None:
    """Dispatch's first step on a vacancy that keeps a late yes (``Vacancy.late_yes_offer``): take it up (a late
    accept, booked under ``ON_ACCEPT``: the patient's yes is given; the booking confirmation is their message).
    None when the late accept is refused (the patient booked elsewhere, no longer fits, the slot is too soon):
    the yes is dropped and dispatch goes on down the list."""
    old = Offer.objects.select_related("clinic", "patient").filter(pk=vacancy.late_yes_offer_id).first()
    if old is None:
        return None
    correlation_id = correlation_id or new_correlation_id()
    try:
        renewed, booked = offer_late_accept_and_book(clinic=old.clinic, offer_ref=old.ref, patient=old.patient,
                                                     now=now, correlation_id=correlation_id,
                                                     system_label="system:dispatch")
    except DomainError as exc:
        logger.info("vacancy %s: late yes of %s not taken up: %s", vacancy.ref, old.ref, exc.code)
        late_yes_drop(vacancy, old, code=exc.code, correlation_id=correlation_id, now=now or timezone.now())
        vacancy.late_yes_offer_id = None
        return None
    if renewed.kept:
        return DispatchResult("ALREADY_OFFERED", None)  # another offer landed meanwhile: the yes waits on
    return DispatchResult("BOOKED" if booked.booked else "OFFERED", renewed.offer)


def _book(offer: Offer, hold_ref: str, *, book_now: bool, correlation_id: str, actor=None, now=None
          ) -> AcceptResult:
    if not book_now:
        return AcceptResult(hold_ref=hold_ref, booked=False)
    try:
        appointment, _created = booking.offer_book(clinic=offer.clinic, hold_ref=hold_ref,
                                                   correlation_id=correlation_id, actor=actor, now=now)
    except DomainError as exc:
        # The hold stays ACCEPTED; reconcile finishes this booking once, then flags it for staff.
        logger.warning("claim page: booking of hold %s left to reconcile: %s", hold_ref, exc.code)
        return AcceptResult(hold_ref=hold_ref, booked=False, booking_error=exc.code)
    return AcceptResult(hold_ref=hold_ref, booked=True, appointment_ref=appointment.ref)


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
