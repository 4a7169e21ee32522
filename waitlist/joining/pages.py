"""The patient's pages (no sign-in): join a clinic's list (``/join/<clinic>/``), enter the code, and the status
page of the signed link (``/join/status/<token>/``).

They take the same steps as the public API (``api.join_ask``, the same limits and services), as plain HTML forms
that work without script, phone-first, in English or Korean (``?lang=``, else the browser's language). The join
page names the clinic, its address and phone; a clinic that has not switched joining on is a plain 404.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework.exceptions import Throttled

from common.clientaddr import client_address
from common.errors import DomainError
from scheduling.models import Clinic, Patient
from waitlist.joining import availability as av
from waitlist.joining.api import captcha_check, join_ask, throttle
from waitlist.joining.inputs import availability_of
from waitlist.joining.selectors import patient_entries
from waitlist.joining.services import (
    entry_patient_edit,
    entry_patient_leave,
    entry_patient_pause,
    join_code_resend,
    join_request_submit,
    join_request_verify,
    joining_open,
    offered_treatments,
)
from waitlist.joining.tokens import status_path, status_token_read
from waitlist.joining.upkeep import open_question, upkeep_answer
from waitlist.notices.confirmation import clinic_contact_shown, local_day, shown_name
from waitlist.offers.pages import LANGUAGES, language_switch
from waitlist.offers.tokens import TokenExpired, TokenInvalid


def _language(request: HttpRequest, stored: str | None = None) -> str:
    chosen = request.POST.get("lang") or request.GET.get("lang")
    if chosen in LANGUAGES:
        return chosen
    if stored in LANGUAGES:
        return stored
    browser = translation.get_language_from_request(request)
    return browser if browser in LANGUAGES else "en"


def _labels() -> dict:
    """Day and part names in the active language (built per request: the lazy names above are English)."""
    days = {"MON": _("Mon"), "TUE": _("Tue"), "WED": _("Wed"), "THU": _("Thu"), "FRI": _("Fri"), "SAT": _("Sat"),
            "SUN": _("Sun")}
    parts = {"MORNING": _("Morning (before 12)"), "AFTERNOON": _("Afternoon (12–5 pm)"),
             "EVENING": _("Evening (after 5 pm)")}
    return {"days": [(d, days[d]) for d in av.DAYS], "parts": [(p, parts[p]) for p in av.PARTS]}


def _clinic(ref: str):
    clinic = Clinic.objects.select_related("tenant_group").filter(ref=ref).first()
    if clinic is None:
        raise Http404()
    try:
        return clinic, joining_open(clinic)
    except DomainError:
        raise Http404() from None


def _page(request, template: str, context: dict, status: int = 200) -> HttpResponse:
    response = render(request, template, {**language_switch(translation.get_language()), **_labels(), **context},
                      status=status)
    response["Content-Language"] = translation.get_language()
    return response


def _throttled(request, exc: Throttled) -> HttpResponse:
    response = render(request, "waitlist/throttled.html", status=429)
    response["Retry-After"] = str(int(getattr(exc, "wait", None) or 60))
    return response


def _clinic_context(clinic, settings) -> dict:
    address, phone = clinic_contact_shown(clinic)
    return {"clinic": clinic, "clinic_name": shown_name(clinic), "address": address, "phone": phone,
            "treatments": [(t.ref, shown_name(t)) for t in offered_treatments(settings)],
            "practitioners": [(p.ref, shown_name(p))
                              for p in clinic.practitioners.filter(active=True).order_by("name")]}


def _errors(exc: DomainError) -> list[str]:
    if exc.code == "THROTTLED":
        return [_("Too many requests. Try again later.")]
    messages = {"PHONE_INVALID": _("Check the phone number."), "TREATMENT_NOT_OFFERED": _("Choose a treatment."),
                "CAPTCHA_FAILED": _("The check that you are a person did not pass."),
                "CODE_INVALID": _("The code is not right. Check the last message and try again."),
                "CODE_EXPIRED": _("The code has expired. Ask for a new one."),
                "CODE_EXHAUSTED": _("Too many wrong codes. Ask for a new one."),
                "CODE_RESEND_LIMITED": _("A new code cannot be sent yet. Wait a minute and try again."),
                "ENTRY_BUSY": _("A time is being offered to you now; change this after you answer it."),
                "ENTRY_DUPLICATE": _("You already wait for this treatment on some of these days.")}
    if exc.code in messages:
        return [messages[exc.code]]
    fields = exc.fields or {}
    names = {"name": _("Your name"), "phone": _("Phone"), "email": _("E-mail"), "consents": _("Messages"),
             "latest": _("Dates"), "earliest": _("Dates"), "availability": _("When you can come"),
             "treatment": _("Treatment"), "practitioner": _("Practitioner")}
    return [_("Check: %(field)s") % {"field": names.get(name, name)} for name in fields] or [
        _("Check the form and try again.")]


def _availability_post(request) -> dict:
    return {"days": request.POST.getlist("days"), "parts": request.POST.getlist("parts")}


@never_cache
@require_http_methods(["GET", "POST"])
def join_page(request: HttpRequest, clinic_ref: str) -> HttpResponse:
    clinic, settings = _clinic(clinic_ref)
    with translation.override(_language(request)):
        context = _clinic_context(clinic, settings)
        form: dict[str, Any] = {"days": list(av.DAYS), "parts": list(av.PARTS), "consents": []}
        if request.method == "POST":
            form = {key: request.POST.get(key, "") for key in ("name", "phone", "email", "treatment", "practitioner",
                                                                "earliest", "latest")}
            form.update(days=request.POST.getlist("days"), parts=request.POST.getlist("parts"),
                        consents=request.POST.getlist("consents"))
            data = {**{k: v for k, v in form.items() if k not in ("days", "parts") and v not in ("", None)},
                    "phone": form["phone"], "email": form["email"], "consents": form["consents"],
                    "availability": _availability_post(request), "language": translation.get_language(),
                    "source": "join_page"}
            address = client_address(request.META)
            try:
                throttle("address", address)
                throttle("clinic", clinic.ref)
                ask = join_ask(clinic, data)
                throttle("contact", f"{clinic.ref}:{ask.phone or ask.email}")
                captcha_check(request.POST.get("captcha_token", ""), address=address, clinic=clinic)
                joined = join_request_submit(clinic=clinic, ask=ask)
            except Throttled as exc:
                return _throttled(request, exc)
            except DomainError as exc:
                return _page(request, "waitlist/join.html", {**context, "form": form, "errors": _errors(exc)},
                             status=400)
            return redirect(f"/join/{clinic.ref}/code/{joined.ref}/?lang={translation.get_language()}")
        return _page(request, "waitlist/join.html", {**context, "form": form})


@never_cache
@require_http_methods(["GET", "POST"])
def code_page(request: HttpRequest, clinic_ref: str, ref: str) -> HttpResponse:
    clinic, settings = _clinic(clinic_ref)
    with translation.override(_language(request)):
        context = {**_clinic_context(clinic, settings), "request_ref": ref}
        if request.method == "POST":
            try:
                throttle("verify", client_address(request.META))
                if request.POST.get("action") == "resend":
                    join_code_resend(clinic=clinic, ref=ref)
                    return _page(request, "waitlist/join_code.html", {**context, "resent": True})
                joined = join_request_verify(clinic=clinic, ref=ref, code=request.POST.get("code", "").strip())
            except Throttled as exc:
                return _throttled(request, exc)
            except DomainError as exc:
                if exc.status_code == 404:
                    raise Http404() from None
                return _page(request, "waitlist/join_code.html", {**context, "errors": _errors(exc)}, status=400)
            if joined is None:
                return _page(request, "waitlist/join_done.html", {**context, "awaiting": True})
            return redirect(status_path(joined.patient) + f"?lang={translation.get_language()}")
        return _page(request, "waitlist/join_code.html", context)


def _status_patient(token: str) -> Patient:
    try:
        patient_ref = status_token_read(token)
    except (TokenInvalid, TokenExpired):
        raise Http404() from None
    patient = Patient.objects.select_related("clinic").filter(ref=patient_ref).first()
    if patient is None:
        raise Http404()
    return patient


def _entry_rows(patient: Patient) -> list[dict]:
    tz = patient.clinic.timezone
    zone = ZoneInfo(tz)
    rows = []
    for row in patient_entries(patient):
        entry = row.entry
        paused = entry.paused_until is not None and entry.paused_until > timezone.now()
        rows.append({
            "ref": entry.ref, "status": entry.status, "treatment": shown_name(entry.treatment),
            "practitioner": shown_name(entry.practitioner) if entry.practitioner else _("Any practitioner"),
            "joined": local_day(entry.created_at, tz), "first": local_day(entry.earliest, tz),
            "last": local_day(entry.latest - timedelta(seconds=1), tz),
            "first_value": entry.earliest.astimezone(zone).date().isoformat(),
            "last_value": (entry.latest - timedelta(seconds=1)).astimezone(zone).date().isoformat(),
            "band": row.band, "paused": paused,
            "paused_until": local_day(entry.paused_until, tz) if paused and entry.paused_until and
            entry.paused_until.year < 9999 else "",
            "slots": set(av.slots_of(entry.availability)), "any_time": entry.availability == av.ANY_TIME,
            "open": entry.status in ("WAITING", "OFFERED", "ACCEPTED"), "editable": entry.status == "WAITING",
            "question": entry.status == "WAITING" and open_question(entry) is not None,
        })
    return rows


@never_cache
@require_http_methods(["GET", "POST"])
def status_page(request: HttpRequest, token: str) -> HttpResponse:
    patient = _status_patient(token)
    with translation.override(_language(request, patient.language)):
        errors: list[str] = []
        saved = ""
        if request.method == "POST":
            entry_ref, action = request.POST.get("entry", ""), request.POST.get("action", "")
            try:
                saved = _status_action(patient, entry_ref, action, request)
            except DomainError as exc:
                if exc.status_code == 404:
                    raise Http404() from None
                errors = _errors(exc)
        address, phone = clinic_contact_shown(patient.clinic)
        return _page(request, "waitlist/join_status.html", {
            "clinic_name": shown_name(patient.clinic), "address": address, "phone": phone,
            "entries": _entry_rows(patient), "errors": errors, "saved": saved,
            "day_slots": [(d, [f"{d}:{p}" for p in av.PARTS]) for d in av.DAYS],
        }, status=400 if errors else 200)


def _status_action(patient: Patient, entry_ref: str, action: str, request) -> str:
    zone = ZoneInfo(patient.clinic.timezone)
    if action in ("still_needed", "not_needed"):
        upkeep_answer(patient=patient, entry_ref=entry_ref, still_needed=action == "still_needed")
        return _("Thank you. Your place is kept.") if action == "still_needed" else _(
            "You have left the waiting list.")
    if action == "leave":
        entry_patient_leave(patient=patient, entry_ref=entry_ref, words=request.POST.get("words", ""))
        return _("You have left the waiting list.")
    if action == "resume":
        entry_patient_pause(patient=patient, entry_ref=entry_ref, until=None)
        return _("Your place is active again.")
    if action == "pause":
        weeks = {"1": 1, "2": 2, "4": 4}.get(request.POST.get("weeks", ""), 0)
        if not weeks:
            raise DomainError(fields={"weeks": ["Choose how long."]})
        entry_patient_pause(patient=patient, entry_ref=entry_ref, until=timezone.now() + timedelta(weeks=weeks))
        return _("Your place is paused.")
    if action == "edit":
        slots = request.POST.getlist("slots")
        mask = availability_of({"slots": slots})
        try:
            first, last = date.fromisoformat(request.POST.get("first", "")), date.fromisoformat(
                request.POST.get("last", ""))
        except ValueError:
            raise DomainError(fields={"latest": ["Give dates."]}) from None
        entry_patient_edit(patient=patient, entry_ref=entry_ref, availability=mask,
                           earliest=datetime.combine(first, time(0), tzinfo=zone),
                           latest=datetime.combine(last + timedelta(days=1), time(0), tzinfo=zone))
        return _("Saved.")
    raise DomainError(fields={"action": ["Unknown."]})
