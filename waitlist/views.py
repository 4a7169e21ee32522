"""The patient claim page (no login): ``/claim/<token>/``. Thin function views over the offer services.

A bad or forged token is a 404, a genuine token for an offer that is no longer open (or an expired
token) a 410: both render the same plain "no longer available" page, never a stack trace or
anything about another patient. The token names one offer (and its entry); nothing in the request
can point it at another. The page speaks the patient's stored language, else the browser's
(``claim_language``), with a visible switch; times carry the clinic's city ("Seoul time").
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone, translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from common.errors import Conflict, NotFound
from common.services import new_correlation_id
from scheduling.models import Appointment, AppointmentStatus

from .models import DeclineReason, Offer, OfferStatus
from .notifications import LANGUAGES, local_datetime
from .services import offer_claim_and_book, offer_decline
from .tokens import TokenExpired, TokenInvalid, claim_token_read

logger = logging.getLogger("waitlist")


def _gone(request: HttpRequest, status: int, language: str | None = None) -> HttpResponse:
    if language:
        with translation.override(language):
            response = render(request, "waitlist/claim_gone.html", status=status)
            response["Content-Language"] = language
            return response
    return render(request, "waitlist/claim_gone.html", status=status)


#: City names of the clinics' zones, translated (the page says "Seoul time", not "Asia/Seoul").
ZONE_CITIES = {
    "Asia/Seoul": _lazy("Seoul"),
    "Europe/Lisbon": _lazy("Lisbon"),
    "Asia/Tokyo": _lazy("Tokyo"),
    "Europe/London": _lazy("London"),
    "America/New_York": _lazy("New York"),
    "UTC": _lazy("UTC"),
}


def zone_label(tz_name: str) -> str:
    """``Asia/Seoul`` → "Seoul time" (ko: "서울 시간"); an unlisted zone shows its city part."""
    city = ZONE_CITIES.get(tz_name) or tz_name.rsplit("/", 1)[-1].replace("_", " ")
    return gettext("%(city)s time") % {"city": city}


def claim_language(request: HttpRequest, offer: Offer) -> str:
    """The patient's explicit switch (``lang``), else their stored language when it is one we serve,
    else the browser's ``Accept-Language`` (en/ko), else English."""
    chosen = request.POST.get("lang") or request.GET.get("lang")
    if chosen in LANGUAGES:
        return chosen
    if offer.patient.language in LANGUAGES:
        return offer.patient.language
    browser = translation.get_language_from_request(request)
    return browser if browser in LANGUAGES else "en"


def _render(request: HttpRequest, offer: Offer, template: str, status: int = 200, **extra) -> HttpResponse:
    clinic, vacancy = offer.clinic, offer.vacancy
    language = translation.get_language()
    context = {
        "clinic_name": clinic.name,
        "treatment_name": vacancy.treatment.name,
        "starts_local": local_datetime(vacancy.starts_at, clinic.timezone),
        "expires_local": local_datetime(offer.expires_at, clinic.timezone),
        "expires_at": offer.expires_at,
        "zone_label": zone_label(clinic.timezone),
        "lang": language,
        "switch": [(code, name) for code, name in (("en", "English"), ("ko", "한국어")) if code != language],
        "decline_reasons": DeclineReason.choices,
        "decline_reason": DeclineReason(offer.decline_reason).label
        if offer.decline_reason in DeclineReason.values
        else "",
        **extra,
    }
    response = render(request, template, context, status=status)
    response["Content-Language"] = language
    return response


def _render_accepted(request: HttpRequest, offer: Offer) -> HttpResponse:
    """Say what is true: "confirmed" once the hold became a CONFIRMED appointment, else "held"."""
    confirmed = Appointment.objects.filter(
        source_hold__offer=offer, status=AppointmentStatus.CONFIRMED
    ).exists()
    return _render(request, offer, "waitlist/claim_accepted.html", confirmed=confirmed)


def _is_open(offer: Offer) -> bool:
    now = timezone.now()
    return offer.status == OfferStatus.OFFERED and now < offer.expires_at and now < offer.vacancy.starts_at


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
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
    language = claim_language(request, offer)
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
            return _render_accepted(request, offer)
        if not _is_open(offer):
            return _gone(request, 410, language)
        return _render(request, offer, "waitlist/claim.html")


def _accept(request: HttpRequest, offer: Offer) -> HttpResponse:
    """Accept through ``offer_claim_and_book`` (claim, and book under ``ON_ACCEPT``). A double submit
    shows the same page; a refused booking still says "held" (reconcile finishes it)."""
    try:
        offer_claim_and_book(offer=offer)
    except NotFound:
        return _gone(request, 404, translation.get_language())
    except Conflict as exc:
        logger.info("claim page: offer %s not claimed: %s", offer.ref, exc.code)
        return _gone(request, 410, translation.get_language())
    return _render_accepted(request, offer)


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
