"""The patient claim page (no login): ``/claim/<token>/``. Thin function views over the offer services.

A bad or forged token is a 404, a genuine token for an offer that is no longer open (or an expired
token) a 410: both render the same plain "no longer available" page, never a stack trace or
anything about another patient. The token names one offer (and its entry); nothing in the request
can point it at another. The page speaks the patient's language (``translation.override``).
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone, translation
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from common.errors import Conflict, DomainError, NotFound
from common.services import new_correlation_id

from .models import Confirmation, DeclineReason, Offer, OfferStatus
from .notifications import LANGUAGES, local_datetime
from .services import offer_book, offer_claim, offer_decline
from .tokens import TokenExpired, TokenInvalid, claim_token_read

logger = logging.getLogger("waitlist")


def _gone(request: HttpRequest, status: int, language: str | None = None) -> HttpResponse:
    if language:
        with translation.override(language):
            response = render(request, "waitlist/claim_gone.html", status=status)
            response["Content-Language"] = language
            return response
    return render(request, "waitlist/claim_gone.html", status=status)


def _render(request: HttpRequest, offer: Offer, template: str, status: int = 200) -> HttpResponse:
    clinic, vacancy = offer.clinic, offer.vacancy
    context = {
        "clinic_name": clinic.name,
        "treatment_name": vacancy.treatment.name,
        "starts_local": local_datetime(vacancy.starts_at, clinic.timezone),
        "expires_local": local_datetime(offer.expires_at, clinic.timezone),
        "expires_at": offer.expires_at,
        "timezone_name": clinic.timezone,
        "decline_reasons": DeclineReason.choices,
        "decline_reason": DeclineReason(offer.decline_reason).label
        if offer.decline_reason in DeclineReason.values
        else "",
    }
    response = render(request, template, context, status=status)
    response["Content-Language"] = translation.get_language()
    return response


def _is_open(offer: Offer) -> bool:
    now = timezone.now()
    return offer.status == OfferStatus.OFFERED and now < offer.expires_at and now < offer.vacancy.starts_at


@never_cache
@require_http_methods(["GET", "POST"])
def claim_page(request: HttpRequest, token: str) -> HttpResponse:
    try:
        offer_ref, entry_ref = claim_token_read(token)
    except TokenInvalid:
        return _gone(request, 404)
    except TokenExpired:
        return _gone(request, 410)
    offer = (
        Offer.objects.select_related("clinic", "patient", "policy", "vacancy__treatment")
        .filter(ref=offer_ref, entry__ref=entry_ref)
        .first()
    )
    if offer is None:
        return _gone(request, 404)
    language = offer.patient.language if offer.patient.language in LANGUAGES else "en"
    with translation.override(language):
        if request.method == "POST":
            action = request.POST.get("action")
            if action == "accept":
                return _accept(request, offer)
            if action == "decline":
                return _decline(request, offer)
            if not _is_open(offer):
                return _gone(request, 410, language)
            return _render(request, offer, "waitlist/claim.html", status=400)
        if offer.status == OfferStatus.ACCEPTED:
            return _render(request, offer, "waitlist/claim_accepted.html")
        if not _is_open(offer):
            return _gone(request, 410, language)
        return _render(request, offer, "waitlist/claim.html")


def _accept(request: HttpRequest, offer: Offer) -> HttpResponse:
    """Claim (OFFERED → ACCEPTED); under ``confirmation=ON_ACCEPT`` (the offer's policy) also run the
    booking command, under ``BOOKING_COMMAND`` leave ACCEPTED for staff or the API client to book.
    A double submit shows the same page."""
    correlation_id = new_correlation_id()
    book_now = offer.policy.confirmation == Confirmation.ON_ACCEPT
    if offer.status != OfferStatus.ACCEPTED:
        try:
            receipt = offer_claim(
                clinic=offer.clinic,
                offer_ref=offer.ref,
                expected_version=offer.version,
                patient=offer.patient,
                correlation_id=correlation_id,
                request_booking=book_now,
            )
        except NotFound:
            return _gone(request, 404, translation.get_language())
        except Conflict as exc:
            logger.info("claim page: offer %s not claimed: %s", offer.ref, exc.code)
            return _gone(request, 410, translation.get_language())
        hold_ref = receipt.hold_ref
    else:
        hold_ref = offer.hold.ref
    if not book_now:
        return _render(request, offer, "waitlist/claim_accepted.html")
    try:
        offer_book(clinic=offer.clinic, hold_ref=hold_ref, correlation_id=correlation_id)
    except DomainError as exc:
        # The hold stays ACCEPTED; reconcile finishes this booking once, then flags it for staff.
        logger.warning("claim page: booking of hold %s left to reconcile: %s", hold_ref, exc.code)
    return _render(request, offer, "waitlist/claim_accepted.html")


def _decline(request: HttpRequest, offer: Offer) -> HttpResponse:
    """Decline with the reason picked on the page (a code; anything else reads as PATIENT_DECLINED)."""
    reason = request.POST.get("reason", "")
    if offer.status != OfferStatus.DECLINED:
        try:
            offer = offer_decline(
                clinic=offer.clinic,
                offer_ref=offer.ref,
                patient=offer.patient,
                reason=reason if reason in DeclineReason.values else "PATIENT_DECLINED",
                correlation_id=new_correlation_id(),
            )
        except NotFound:
            return _gone(request, 404, translation.get_language())
        except Conflict as exc:
            logger.info("claim page: offer %s not declined: %s", offer.ref, exc.code)
            return _gone(request, 410, translation.get_language())
    return _render(request, offer, "waitlist/claim_declined.html")
