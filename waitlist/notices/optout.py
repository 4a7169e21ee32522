"""The opt-out page (no sign-in): ``/optout/<token>/`` from the link in every notice.

GET shows the patient's current state and one button; POST records REVOKED on every channel (source
OPT_OUT_LINK) through ``scheduling``'s consent service: a new history row, nothing deleted. A link prefetcher
(GET) never opts anyone out. A bad token is a plain 404 page, an expired one (older than
``WAITLIST_OPTOUT_TOKEN_MAX_AGE_DAYS``) 410. Like the claim page, it speaks the patient's language (else
the browser's) with an en/ko switch that the form carries, names the clinic in that language and shows
no contact data of the patient.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from scheduling.models import ConsentSource, ConsentState, ContactChannel, Patient
from scheduling.services.consent import consent_current, consent_record
from waitlist.notices.confirmation import clinic_contact_shown, shown_name
from waitlist.offers.pages import language_switch, page_language
from waitlist.offers.tokens import TokenExpired, TokenInvalid, optout_link, optout_token_read


def _render(request: HttpRequest, patient: Patient, status: int = 200) -> HttpResponse:
    current = consent_current(patient.pk)
    context = {"clinic_name": shown_name(patient.clinic), "clinic_phone": clinic_contact_shown(patient.clinic)[1],
               **language_switch(translation.get_language()),
               "opted_out": not any(state == ConsentState.GRANTED for state in current.values())}
    response = render(request, "waitlist/optout.html", context, status=status)
    response["Content-Language"] = translation.get_language()
    return response


@never_cache
@require_http_methods(["GET", "POST"])
def optout_page(request: HttpRequest, token: str) -> HttpResponse:
    try:
        patient_ref = optout_token_read(token)
    except TokenInvalid:
        return render(request, "waitlist/optout_invalid.html", status=404)
    except TokenExpired:  # the newest notice carries a fresh link; the clinic can change it too
        return render(request, "waitlist/optout_invalid.html", status=410)
    patient = Patient.objects.select_related("clinic").filter(ref=patient_ref).first()
    if patient is None:
        return render(request, "waitlist/optout_invalid.html", status=404)
    with translation.override(page_language(request, patient)):
        if request.method == "POST":
            consent_record(patient=patient, channels=ContactChannel.values, state=ConsentState.REVOKED,
                           source=ConsentSource.OPT_OUT_LINK, actor_label="patient")
        return _render(request, patient)


def demo_optout_lines(world: dict) -> list[str]:
    """``seed_demo``'s (and so ``make run``'s) line with a demo patient's opt-out link: the link every notice
    ends with is a bearer secret that logs show only as a digest, so the tour needs one printed."""
    clinics = world.get("clinics") or []
    patient = (Patient.objects.filter(clinic=clinics[0], language="ko").order_by("pk").first()
               if clinics else None)
    if patient is None:
        return []
    return [f"Opt-out page of demo patient {patient.ref} ({patient.language}): {optout_link(patient)}"]
