"""The patient's proposal page (no login): ``/claim/rp-<token>/``. A thin view over ``proposals.services``.

Like the claim page: a bad or forged token is a plain 404 "no longer available" page, a token past its max
age 410; the token names one proposal and nothing in the request can point it at another. It shows what
the claim page shows (clinic, treatment, times in the clinic's zone) and no more; the patient accepts one
of the times, keeps the current appointment, or asks to be called. The form carries the digest of what the
page showed, so the consent row records exactly that (a proposal that changed meanwhile is shown again).
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from common.errors import Conflict, NotFound, ValidationFailed
from reevaluation.proposals.models import ANSWERABLE_STATES, AppointmentProposal, ProposalState
from reevaluation.proposals.services import is_current, proposal_answer, proposal_options, proposal_shown, shown_digest
from reevaluation.proposals.tokens import TokenExpired, TokenInvalid, proposal_token_read
from scheduling.models import Appointment
from waitlist.notices.offer_notice import LANGUAGES, local_datetime, zone_label

logger = logging.getLogger("reevaluation")

PAGE = "reevaluation/proposal.html"
#: Ended proposals answer 410 (the link can do nothing more).
ENDED = (ProposalState.EXPIRED, ProposalState.REJECTED, ProposalState.SUPERSEDED)


def _gone(request: HttpRequest, status: int, language: str | None = None) -> HttpResponse:
    with translation.override(language or translation.get_language()):
        response = render(request, "reevaluation/proposal_gone.html", status=status)
        response["Content-Language"] = translation.get_language()
        return response


def _language(request: HttpRequest, proposal: AppointmentProposal) -> str:
    chosen = request.POST.get("lang") or request.GET.get("lang")
    if chosen in LANGUAGES:
        return chosen
    if proposal.patient.language in LANGUAGES:
        return proposal.patient.language
    browser = translation.get_language_from_request(request)
    return browser if browser in LANGUAGES else "en"


def _load(ref: str) -> AppointmentProposal | None:
    return AppointmentProposal.objects.select_related("clinic", "patient").filter(ref=ref).first()


def _appointment(clinic, ref: str) -> Appointment | None:
    return (Appointment.objects.select_related("treatment", "practitioner").filter(clinic=clinic, ref=ref).first()
            if ref else None)


def _option(option, current: Appointment | None, proposal: AppointmentProposal, tz: str, language: str) -> dict:
    """One time as the page shows it: names in the patient's language, and whether it is the current appointment
    itself or keeps its hour (then only the practitioner, treatment or room changes): the page says which."""
    return {"ref": option.ref, "treatment": option.treatment.name_in(language),
            "practitioner": option.practitioner.name_in(language),
            "starts_local": local_datetime(option.starts_at, tz), "held": option.hold_id is not None,
            "chosen": option.pk == proposal.chosen_option_id,
            "current_time": is_current(option, current),
            "same_time": current is not None and option.starts_at == current.starts_at,
            "new_practitioner": current is not None and option.practitioner_id != current.practitioner_id}


def _render(request: HttpRequest, proposal: AppointmentProposal, *, status: int = 200,
            message: str = "") -> HttpResponse:
    clinic, tz = proposal.clinic, proposal.clinic.timezone
    if proposal.state in ENDED or (proposal.state in ANSWERABLE_STATES and timezone.now() >= proposal.expires_at):
        return _gone(request, 410)
    current = _appointment(clinic, proposal.appointment_ref)
    result = _appointment(clinic, proposal.result_appointment_ref)
    language = translation.get_language()
    options = [_option(o, current, proposal, tz, language) for o in proposal_options(proposal, current)]
    context = {
        "clinic_name": clinic.name_in(language),
        "state": proposal.state,
        "needs_operator": proposal.needs_operator,
        "current": None if current is None else {
            "treatment": current.treatment.name_in(language), "practitioner": current.practitioner.name_in(language),
            "starts_local": local_datetime(current.starts_at, tz)},
        "options": options,
        "practitioner_changes": any(o["new_practitioner"] for o in options),
        "result": None if result is None else {
            "treatment": result.treatment.name_in(language), "practitioner": result.practitioner.name_in(language),
            "starts_local": local_datetime(result.starts_at, tz), "status": result.status},
        "expires_at": proposal.expires_at,
        "expires_local": local_datetime(proposal.expires_at, tz),
        "zone_label": zone_label(tz),
        "digest": shown_digest(proposal_shown(proposal)),
        "message": message,
        "lang": language,
        "switch": [(code, name) for code, name in (("en", "English"), ("ko", "한국어")) if code != language],
    }
    response = render(request, PAGE, context, status=status)
    response["Content-Language"] = language
    return response


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def proposal_page(request: HttpRequest, token: str) -> HttpResponse:
    try:
        ref = proposal_token_read(token)
    except TokenInvalid:
        return _gone(request, 404)
    except TokenExpired:
        return _gone(request, 410)
    proposal = _load(ref)
    if proposal is None:
        return _gone(request, 404)
    with translation.override(_language(request, proposal)):
        if request.method != "POST":
            return _render(request, proposal)
        try:
            proposal_answer(
                proposal_ref=proposal.ref, choice=request.POST.get("choice", ""),
                option_ref=request.POST.get("option", ""), digest=request.POST.get("digest", ""),
                language=translation.get_language(),
            )
        except NotFound:
            return _gone(request, 404)
        except ValidationFailed:
            return _render(request, proposal, status=400, message=_("Please choose one of the times below."))
        except Conflict as exc:
            logger.info("proposal page: proposal %s not answered: %s", proposal.ref, exc.code)
            fresh = _load(proposal.ref)
            if fresh is None:
                return _gone(request, 404)
            return _render(request, fresh, status=409,
                           message=_("That did not go through: the proposal or the time changed. Here is what "
                                     "stands now."))
        fresh = _load(proposal.ref)
        if fresh is None:
            return _gone(request, 404)
        return _render(request, fresh)
