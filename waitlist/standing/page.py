"""The "book me automatically" page (no sign-in): ``/standing/<token>/`` from the link in every waitlist notice.

GET shows whether the patient's entry is booked automatically and one form; POST grants (with the minimum notice
the patient picks) or revokes it through ``standing_acceptance_record`` (source NOTICE_LINK, actor "patient"):
a new history row, nothing deleted. A link prefetcher (GET) never changes anything. A bad or expired token is a
plain 404 page; the page speaks the patient's language (else the browser's) with the en/ko switch, names
the clinic and treatment in it, and shows no contact data.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from common.errors import DomainError
from waitlist.models import OPEN_ENTRY_STATUSES, StandingAcceptanceSource, StandingAcceptanceState, WaitlistEntry
from waitlist.notices.confirmation import shown_name
from waitlist.offers.pages import language_switch, page_language
from waitlist.offers.tokens import TokenExpired, TokenInvalid, standing_token_read
from waitlist.selectors import standing_current
from waitlist.services import standing_acceptance_record

#: The minimum notices a patient can pick (minutes → label): any slot, or only those this far ahead.
NOTICE_CHOICES = (
    (0, _("Any time that fits my request")),
    (180, _("Only if it is at least 3 hours away")),
    (1440, _("Only if it is at least a day away")),
    (2880, _("Only if it is at least two days away")),
)


def _render(request: HttpRequest, entry: WaitlistEntry, *, error: str = "", status: int = 200) -> HttpResponse:
    current = standing_current(entry=entry)
    granted = current is not None and current.state == StandingAcceptanceState.GRANTED
    context = {"clinic_name": shown_name(entry.clinic), "treatment": shown_name(entry.treatment), "granted": granted,
               **language_switch(translation.get_language()),
               "min_notice": current.min_notice_minutes if granted else 0, "choices": NOTICE_CHOICES,
               "open": entry.status in OPEN_ENTRY_STATUSES, "error": error}
    response = render(request, "waitlist/standing.html", context, status=status)
    response["Content-Language"] = translation.get_language()
    return response


def _notice_minutes(value) -> int | None:
    try:
        minutes = int(value)
    except (TypeError, ValueError):
        return None
    return minutes if minutes in dict(NOTICE_CHOICES) else None


@never_cache
@require_http_methods(["GET", "POST"])
def standing_page(request: HttpRequest, token: str) -> HttpResponse:
    try:
        entry_ref = standing_token_read(token)
    except (TokenInvalid, TokenExpired):
        return render(request, "waitlist/optout_invalid.html", status=404)
    entry = WaitlistEntry.objects.select_related("clinic", "patient", "treatment").filter(ref=entry_ref).first()
    if entry is None:
        return render(request, "waitlist/optout_invalid.html", status=404)
    with translation.override(page_language(request, entry.patient)):
        if request.method != "POST":
            return _render(request, entry)
        grant = request.POST.get("action") == "grant"
        minutes = _notice_minutes(request.POST.get("min_notice_minutes", "0")) if grant else 0
        if minutes is None:
            return _render(request, entry, error=str(_("Choose one of the options.")), status=400)
        try:
            standing_acceptance_record(
                clinic=entry.clinic, entry_ref=entry.ref, min_notice_minutes=minutes,
                state=StandingAcceptanceState.GRANTED if grant else StandingAcceptanceState.REVOKED,
                source=StandingAcceptanceSource.NOTICE_LINK)
        except DomainError:
            return _render(request, entry, error=str(_("You are no longer on this waiting list.")), status=409)
        return _render(request, entry)
