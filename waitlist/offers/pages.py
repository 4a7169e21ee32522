"""The patient claim page (no login): ``/claim/<token>/``. Thin function views over the offer services.

A bad or forged token is a plain 404 "no longer available" page, and so is a token past its max age
(410): never a stack trace or anything about another patient. A genuine token whose offer is no
longer open says what happened (``selectors_claim.claim_outcome``): "you declined this time", "this
offer ended at …", "the clinic withdrew this offer", "your appointment is confirmed" (with its
details and calendar file), with 410 for the ended ones. The token names one offer (and its entry);
nothing in the request can point it at another. The page speaks the patient's stored language, else
the browser's (``page_language``, shared with the opt-out and standing pages), with a visible switch; times
carry the clinic's city ("Seoul time"); clinic, practitioner and treatment go by their names in that language
(``DisplayNamed.name_in``); the open offer's time left is a live countdown (``countdown``, static/waitlist/claim.js).

``/claim/<token>.ics`` serves a booking's calendar file (the link in SMS and webhook
confirmations) while the appointment is CONFIRMED and not over; a bad token is a plain 404.
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from common.errors import Conflict, NotFound
from common.services import new_correlation_id
from common.shortcodes import display_code
from scheduling.models import Appointment, AppointmentStatus, Patient
from waitlist.models import Confirmation, DeclineReason, Offer
from waitlist.notices.confirmation import (
    booking_facts,
    booking_ics,
    clinic_contact_shown,
    local_moment,
    shown_name,
    slot_facts,
)
from waitlist.notices.offer_notice import LANGUAGES, local_datetime, zone_label
from waitlist.offers.calendar import FILENAME, MIME_TYPE
from waitlist.offers.claim_reads import (
    AnswerStep,
    ClaimOutcome,
    ClaimState,
    answer_step,
    claim_offer,
    claim_outcome,
    renewal_of,
)
from waitlist.offers.tokens import (
    TokenExpired,
    TokenInvalid,
    calendar_link,
    calendar_token_read,
    claim_token_read,
    standing_link,
)
from waitlist.services import offer_claim_and_book, offer_decline, offer_late_accept_and_book, standing_release
from waitlist.texts.models import AckVia
from waitlist.texts.services.acknowledgement import acknowledgement_record, acknowledgement_record_for_appointment

logger = logging.getLogger("waitlist")

#: The page of each state (the open offer's own page is claim.html).
STATE_TEMPLATES = {
    ClaimState.HELD: "waitlist/claim_accepted.html",
    ClaimState.BOOKED: "waitlist/claim_accepted.html",
    ClaimState.DECLINED: "waitlist/claim_declined.html",
    ClaimState.EXPIRED: "waitlist/claim_ended.html",
    ClaimState.WITHDRAWN: "waitlist/claim_ended.html",
    ClaimState.RELEASED: "waitlist/claim_ended.html",
    ClaimState.BOOKING_CANCELLED: "waitlist/claim_ended.html",
}
#: Ended states answer 410 (the link can do nothing more); held and booked ones 200.
ENDED_STATES = (ClaimState.DECLINED, ClaimState.EXPIRED, ClaimState.WITHDRAWN, ClaimState.BOOKING_CANCELLED,
                ClaimState.RELEASED)


def _gone(request: HttpRequest, status: int, language: str | None = None, offer: Offer | None = None) -> HttpResponse:
    """The "no longer available" page; with the offer (a genuine link), the clinic's phone to call."""
    context = {}
    if offer is not None:
        with translation.override(language):
            context = {"clinic_name": shown_name(offer.clinic), "clinic_phone": clinic_contact_shown(offer.clinic)[1]}
    if language:
        with translation.override(language):
            response = render(request, "waitlist/claim_gone.html", context, status=status)
            response["Content-Language"] = language
            return response
    return render(request, "waitlist/claim_gone.html", context, status=status)


def page_language(request: HttpRequest, patient: Patient) -> str:
    """The patient's explicit switch (``lang``), else their stored language when it is one we serve,
    else the browser's ``Accept-Language`` (en/ko), else English. Used by every patient page."""
    chosen = request.POST.get("lang") or request.GET.get("lang")
    if chosen in LANGUAGES:
        return chosen
    if patient.language in LANGUAGES:
        return patient.language
    browser = translation.get_language_from_request(request)
    return browser if browser in LANGUAGES else "en"


def claim_language(request: HttpRequest, offer: Offer) -> str:
    return page_language(request, offer.patient)


def language_switch(language: str) -> dict:
    """The page's language (for the forms' hidden ``lang``) and links to the other languages."""
    return {"lang": language,
            "switch": [(code, name) for code, name in (("en", "English"), ("ko", "한국어")) if code != language]}


def time_left_text(seconds: float) -> str:
    """ "14 min left", "2 h 5 min left", "Less than a minute left" (whole minutes, rounded down, as the page's
    script counts them)."""
    minutes = int(max(seconds, 0) // 60)
    if minutes < 1:
        return _("Less than a minute left")
    hours, minutes = divmod(minutes, 60)
    if hours:
        return _("%(hours)s h %(minutes)s min left") % {"hours": hours, "minutes": minutes}
    return _("%(minutes)s min left") % {"minutes": minutes}


def countdown(deadline) -> dict:
    """What ``static/waitlist/claim.js`` needs to count down without trusting the phone's clock: the seconds
    left when the page was made, and the phrases with ``{h}``/``{m}`` holes, in the page's language."""
    seconds = max(int((deadline - timezone.now()).total_seconds()), 0)
    return {
        "seconds": seconds,
        "text": time_left_text(seconds),
        "t_hm": _("%(hours)s h %(minutes)s min left") % {"hours": "{h}", "minutes": "{m}"},
        "t_m": _("%(minutes)s min left") % {"minutes": "{m}"},
        "t_lt": _("Less than a minute left"),
        "t_end": _("The time to answer has run out. Reload the page to see what happened."),
    }


def _render(request: HttpRequest, offer: Offer, template: str, status: int = 200, **extra) -> HttpResponse:
    clinic, vacancy = offer.clinic, offer.vacancy
    language = translation.get_language()
    deadline = min(offer.expires_at, vacancy.starts_at)
    slot = slot_facts(clinic, vacancy.practitioner, vacancy.treatment, vacancy.starts_at, vacancy.ends_at,
                      code=display_code(clinic, offer.code))
    context = {
        "clinic_name": slot.clinic,
        "treatment_name": slot.treatment,
        "slot": slot,
        "starts_local": local_datetime(vacancy.starts_at, clinic.timezone),
        "expires_local": local_moment(deadline, clinic.timezone),
        "expires_at": deadline,
        # Only the open offer's page counts down (the other pages' times are over or settled).
        "countdown": countdown(deadline) if template == "waitlist/claim.html" else None,
        "zone_label": zone_label(clinic.timezone),
        **language_switch(language),
        "decline_reasons": [c for c in DeclineReason.choices if c[0] != DeclineReason.SMS_DECLINE],
        "decline_reason": DeclineReason(offer.decline_reason).label
        if offer.decline_reason in DeclineReason.values
        else "",
        **extra,
    }
    response = render(request, template, context, status=status)
    response["Content-Language"] = language
    return response


def _render_outcome(request: HttpRequest, offer: Offer, outcome: ClaimOutcome, status: int | None = None,
                    late_refused: bool = False) -> HttpResponse:
    """The page of a held, booked or ended offer: what happened, and when, in the clinic's zone. An offer
    still open here is one a command just refused (a stale decision, a taken slot): no longer available."""
    if outcome.is_open:
        return _gone(request, 410, translation.get_language(), offer)
    extra: dict = {"state": outcome.state, "on_list": outcome.on_list, "confirmed": False}
    if outcome.ended_at is not None:
        extra["ended_local"] = local_moment(outcome.ended_at, offer.clinic.timezone)
    if outcome.state == ClaimState.BOOKED and outcome.appointment is not None:
        extra.update(confirmed=True, booking=booking_facts(outcome.appointment),
                     calendar_url=calendar_link(outcome.appointment))
        if outcome.release_until is not None:
            extra.update(release_local=local_moment(outcome.release_until, offer.clinic.timezone))
    if outcome.on_list and offer.policy.standing_acceptance:
        extra["standing_url"] = standing_link(offer.entry)
    # A late accept the command refused (a racer took the time, the decision went stale): no second button.
    extra.update(late_yes="" if late_refused else outcome.late_yes, late_refused=late_refused,
                 books_at_once=offer.policy.confirmation == Confirmation.ON_ACCEPT)
    if status is None:
        status = 410 if outcome.state in ENDED_STATES else 200
    return _render(request, offer, STATE_TEMPLATES[ClaimState(outcome.state)], status=status, **extra)


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def claim_page(request: HttpRequest, token: str) -> HttpResponse:
    try:
        offer_ref, entry_ref = claim_token_read(token)
    except TokenInvalid:
        return _gone(request, 404)
    except TokenExpired:
        return _gone(request, 410)
    offer = claim_offer(offer_ref, entry_ref)
    if offer is None:
        return _gone(request, 404)
    offer = renewal_of(offer)  # after a late accept, the link stands for the offer that took the time up
    language = claim_language(request, offer)
    with translation.override(language):
        outcome = claim_outcome(offer)
        if request.method == "POST":
            action = request.POST.get("action")
            if action == "accept":
                return _accept(request, offer, outcome)
            if action == "decline":
                return _decline(request, offer, outcome)
            if action == "release":
                return _release(request, offer, outcome)
            if not outcome.is_open:
                return _render_outcome(request, offer, outcome)
            return _render(request, offer, "waitlist/claim.html", status=400)
        if outcome.state == ClaimState.BOOKED and offer.standing:  # an automatic booking, seen (issue 39)
            acknowledgement_record(offer_id=offer.pk, via=AckVia.LINK)
        if not outcome.is_open:
            return _render_outcome(request, offer, outcome)
        return _render(request, offer, "waitlist/claim.html")


def _again(request: HttpRequest, offer: Offer, *, late: bool = False, late_refused: bool = False) -> HttpResponse:
    """After a command changed (or refused to change) the offer: read it again (the renewal a late accept made,
    if any) and say what is true. A decline (this one, or a double submit) and a late accept (``late``) are the
    answer to the patient's POST, so they are a 200."""
    fresh = claim_offer(offer.ref, offer.entry.ref)
    if fresh is None:
        return _gone(request, 404, translation.get_language())
    fresh = renewal_of(fresh)
    outcome = claim_outcome(fresh)
    status = 200 if late or outcome.state == ClaimState.DECLINED else None
    return _render_outcome(request, fresh, outcome, status=status, late_refused=late_refused)


def _accept(request: HttpRequest, offer: Offer, outcome: ClaimOutcome) -> HttpResponse:
    """Accept through ``offer_claim_and_book`` (claim, and book under ``ON_ACCEPT``). A double submit
    shows the same page; a refused booking still says "held" (reconcile finishes it); an offer that
    has ended says how; one that ended unanswered while its time is still free is taken up late (a new offer,
    which the link then stands for), or, while someone else is asked, the yes is kept for when it comes back."""
    step = answer_step(outcome, yes=True)
    if step == AnswerStep.LATE_ACCEPT:
        refused = False
        try:
            offer_late_accept_and_book(clinic=offer.clinic, offer_ref=offer.ref, patient=offer.patient)
        except NotFound:
            return _gone(request, 404, translation.get_language())
        except Conflict as exc:
            refused = True
            logger.info("claim page: offer %s not taken up late: %s", offer.ref, exc.code)
        return _again(request, offer, late=True, late_refused=refused)
    if step == AnswerStep.ENDED:
        return _render_outcome(request, offer, outcome)
    try:
        offer_claim_and_book(offer=offer)
    except NotFound:
        return _gone(request, 404, translation.get_language())
    except Conflict as exc:
        logger.info("claim page: offer %s not claimed: %s", offer.ref, exc.code)
    return _again(request, offer)


def _decline(request: HttpRequest, offer: Offer, outcome: ClaimOutcome) -> HttpResponse:
    """Decline with the reason picked on the page (a code; anything else reads as PATIENT_DECLINED)."""
    step = answer_step(outcome, yes=False)
    if step == AnswerStep.ALREADY_DECLINED:
        return _again(request, offer)
    if step == AnswerStep.ENDED:
        return _render_outcome(request, offer, outcome)
    reason = request.POST.get("reason", "")
    try:
        offer_decline(
            clinic=offer.clinic,
            offer_ref=offer.ref,
            patient=offer.patient,
            reason=reason if reason in DeclineReason.values and reason != DeclineReason.SMS_DECLINE
            else "PATIENT_DECLINED",
            correlation_id=new_correlation_id(),
        )
    except NotFound:
        return _gone(request, 404, translation.get_language())
    except Conflict as exc:
        logger.info("claim page: offer %s not declined: %s", offer.ref, exc.code)
    return _again(request, offer)


def _release(request: HttpRequest, offer: Offer, outcome: ClaimOutcome) -> HttpResponse:
    """Release a booking made automatically (standing acceptance): the time goes back to the waiting list."""
    if outcome.state != ClaimState.BOOKED or not offer.standing:
        return _render_outcome(request, offer, outcome)
    try:
        standing_release(clinic=offer.clinic, offer_ref=offer.ref, patient=offer.patient,
                         correlation_id=new_correlation_id())
    except NotFound:
        return _gone(request, 404, translation.get_language())
    except Conflict as exc:
        logger.info("claim page: offer %s not released: %s", offer.ref, exc.code)
    fresh = claim_offer(offer.ref, offer.entry.ref)
    if fresh is None:
        return _gone(request, 404, translation.get_language())
    return _render_outcome(request, fresh, claim_outcome(fresh), status=200)


@never_cache
@require_http_methods(["GET", "HEAD"])
def claim_calendar(request: HttpRequest, token: str) -> HttpResponse:
    """The booking's ``.ics`` (RFC 5545) in the patient's language, while the booking stands."""
    try:
        appointment_ref = calendar_token_read(token)
    except TokenInvalid:
        return _gone(request, 404)
    appointment = (Appointment.objects.select_related("clinic", "patient", "practitioner", "treatment")
                   .filter(ref=appointment_ref).first())
    if appointment is None:
        return _gone(request, 404)
    language = appointment.patient.language if appointment.patient.language in LANGUAGES else "en"
    if appointment.status != AppointmentStatus.CONFIRMED or timezone.now() >= appointment.ends_at:
        return _gone(request, 410, language)
    acknowledgement_record_for_appointment(appointment_id=appointment.pk, via=AckVia.CALENDAR)
    response = HttpResponse(booking_ics(appointment, language), content_type=f"{MIME_TYPE}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{FILENAME}"'
    response["Content-Language"] = language
    return response
