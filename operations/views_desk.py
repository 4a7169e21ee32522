"""The front desk: the verbs of a phone call (cancel an appointment, put a patient on the waitlist, act for a
patient on an offer), each through the service the API calls, with the API's role (``COMMAND_ROLES``), its
validation (the API's serializers: the same typed errors) and its refusals (nothing changes).

Every verb runs through the console's command runner (``operations.commands.run_command``): once per
idempotency key, and audited there (``console.<command>``) with the evidence: the reason, or "the patient said
so on the phone". Answers carry refs, codes and states only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from common.api.errors import field_errors
from common.errors import DomainError, PermissionDenied, ValidationFailed
from common.services import new_correlation_id
from common.shortcodes import clinic_prefix, display_code, parse_code
from scheduling.api.serializers import CancelInput
from scheduling.models import Appointment, CancelActor, Clinic, Practitioner, Treatment, cancel_actor_ref
from scheduling.scoping import may_run
from waitlist import services
from waitlist.api.serializers import EntryCreateInput, StandingAcceptanceInput
from waitlist.joining.availability import ANY_TIME, slots_of
from waitlist.joining.availability import as_body as availability_body
from waitlist.models import Confirmation, Offer, WaitlistEntry

from .commands import refused, run_command
from .decorators import clinic_view
from .forms import new_idempotency_key
from .forms_desk import (
    DAY_CHOICES,
    PART_CHOICES,
    PHONE_EVIDENCE,
    CancelForm,
    DeclineForm,
    DeskForm,
    EntryForm,
    OfferPhoneForm,
    ReleaseForm,
    StandingForm,
)
from .responses import HtmxHttpRequest, render_clinic_page, with_toast
from .views_waitlist import CHANGED_EVENT

PAGE = "operations/desk.html"


def resolve_ref(clinic: Clinic, model, text: str) -> str:
    """What staff typed, as the object's ref in this clinic: its ref, or its short code (``GN-7KQ3`` or ``7KQ3``;
    a prefix that is not this clinic's names nothing here). Anything else goes on as typed: the service's
    NOT_FOUND."""
    text = text.strip()
    parsed = parse_code(text) if "_" not in text else None
    if parsed is None or (parsed[0] and parsed[0] != clinic_prefix(clinic)):
        return text
    ref = model._default_manager.filter(clinic=clinic, code=parsed[1]).values_list("ref", flat=True).first()
    return ref or text


def _validated(serializer_class, clinic: Clinic, data: dict) -> dict:
    """The API's own validation of the same body: its refusal is the API's VALIDATION_ERROR."""
    serializer = serializer_class(data=data, context={"clinic": clinic})
    if not serializer.is_valid():
        raise ValidationFailed("The request is not valid.", fields=field_errors(serializer.errors))
    return serializer.validated_data


def _evidence(data: dict, reason: str = "") -> str:
    words = "; ".join(part for part in (PHONE_EVIDENCE, reason, data.get("note", "")) if part)
    return words[:500]


# --- the verbs ------------------------------------------------------------------------------------


def _cancel(request, clinic: Clinic, data: dict, correlation_id: str) -> dict:
    body = _validated(CancelInput, clinic, {"reason": data["reason"], "reason_code": data["reason_code"]})
    appointment, vacancy = services.appointment_cancel_with_vacancy(
        clinic=clinic, appointment_ref=resolve_ref(clinic, Appointment, data["appointment"]),
        reason=body["reason"], reason_code=body["reason_code"],
        cancelled_by=cancel_actor_ref(CancelActor.STAFF, request.user), actor=request.user,
        idempotency_key=data.get("idempotency_key", ""), correlation_id=correlation_id)
    opened = f" Vacancy {vacancy.ref} opened; the waitlist is being offered the time." if vacancy else (
        " No vacancy opened (not confirmed, or too close to its start).")
    return {"ref": appointment.ref, "status": appointment.status, "vacancy": vacancy.ref if vacancy else None,
            "message": f"Appointment {_code(appointment)} is {_words(appointment.status)}.{opened}"}


def _entry(request, clinic: Clinic, data: dict, correlation_id: str) -> dict:
    body = _validated(EntryCreateInput, clinic, {
        "patient": data["patient"], "treatment": data["treatment"], "practitioner": data["practitioner"] or None,
        "earliest": data["earliest"].isoformat(), "latest": data["latest"].isoformat(),
        "priority_rank": int(data["priority_rank"]), "availability": data["availability"]})
    if body.get("priority_rank") and not may_run(request.user, clinic, "entry_set_priority"):
        raise PermissionDenied("Setting a priority needs the ADMIN role in this clinic.")
    entry = services.entry_create(clinic=clinic, actor=request.user, idempotency_key=data["idempotency_key"], **body)
    return {"ref": entry.ref, "status": entry.status, "availability": availability_body(entry.availability),
            "message": f"Waitlist entry {entry.ref} is {_words(entry.status)}; can come: "
                       f"{_availability_words(entry.availability)}."}


def _availability_words(mask: int) -> str:
    """``any time`` or ``Mon morning, Mon afternoon, …``: what staff read back to the patient."""
    if mask == ANY_TIME:
        return "any time"
    days, parts = dict(DAY_CHOICES), dict(PART_CHOICES)
    return ", ".join(f"{days[day][:3]} {parts[part].split(' ')[0].lower()}"
                     for day, _, part in (slot.partition(":") for slot in slots_of(mask)))


def _accept(request, clinic: Clinic, data: dict, correlation_id: str) -> dict:
    """The patient's yes, as the claim page takes it: claimed, and booked at once under ``ON_ACCEPT``."""
    offer_ref = resolve_ref(clinic, Offer, data["offer"])
    offer = Offer.objects.select_related("policy").filter(clinic=clinic, ref=offer_ref).first()
    book_now = offer is not None and offer.policy.confirmation == Confirmation.ON_ACCEPT
    receipt = services.offer_claim(clinic=clinic, offer_ref=offer_ref, expected_version=offer.version if offer else 1,
                                   actor=request.user, idempotency_key=data["idempotency_key"],
                                   correlation_id=correlation_id, request_booking=book_now)
    appointment = receipt.appointment_ref
    if book_now and not appointment:
        try:
            booked, _created = services.offer_book(clinic=clinic, hold_ref=receipt.hold_ref, actor=request.user,
                                                   correlation_id=correlation_id)
            appointment = booked.ref
        except DomainError as exc:  # the claim stands; reconcile finishes the booking (as on the claim page)
            return {"ref": offer_ref, "status": "ACCEPTED", "hold": receipt.hold_ref, "booking_error": exc.code,
                    "message": f"Offer {_code(offer)} accepted; booking left to retry ({_words(exc.code)})."}
    booked_words = f" Booked as appointment {_booked_code(clinic, appointment)}." if appointment else (
        " The booking follows.")
    return {"ref": offer_ref, "status": "ACCEPTED", "hold": receipt.hold_ref, "appointment": appointment or None,
            "message": f"Offer {_code(offer)} accepted for the patient.{booked_words}"}


def _decline(request, clinic: Clinic, data: dict, correlation_id: str) -> dict:
    offer = services.offer_decline(clinic=clinic, offer_ref=resolve_ref(clinic, Offer, data["offer"]),
                                   actor=request.user, reason=data["reason"], correlation_id=correlation_id,
                                   idempotency_key=data["idempotency_key"])
    return {"ref": offer.ref, "status": offer.status, "message": f"Offer {_code(offer)} is {_words(offer.status)}."}


def _late_yes(request, clinic: Clinic, data: dict, correlation_id: str) -> dict:
    renewed, booked = services.offer_late_accept_and_book(
        clinic=clinic, offer_ref=resolve_ref(clinic, Offer, data["offer"]), actor=request.user,
        correlation_id=correlation_id)
    offer = renewed.offer
    if renewed.kept:
        return {"ref": offer.ref, "status": "KEPT",
                "message": "The time is offered to someone else now: the patient's yes is kept and wins if that "
                           "offer ends unbooked."}
    words = f" Booked as appointment {_booked_code(clinic, booked.appointment_ref)}." if booked.appointment_ref else ""
    return {"ref": offer.ref, "status": offer.status, "appointment": booked.appointment_ref or None,
            "message": f"Late yes taken: offer {_code(offer)} is {_words(offer.status)}.{words}"}


def _standing(request, clinic: Clinic, data: dict, correlation_id: str) -> dict:
    body = _validated(StandingAcceptanceInput, clinic, {
        "state": data["state"], "min_notice_minutes": data["min_notice_minutes"], "source": "STAFF",
        "reason": _evidence(data)[:200]})
    entry_ref = resolve_ref(clinic, WaitlistEntry, data["entry"])
    row = services.standing_acceptance_record(clinic=clinic, entry_ref=entry_ref, actor=request.user, **body)
    return {"ref": entry_ref, "status": row.state,
            "message": f"Entry {entry_ref}: {_words(row.state, 'standing')} (at least {row.min_notice_minutes} min "
                       "notice)."}


def _release(request, clinic: Clinic, data: dict, correlation_id: str) -> dict:
    offer, vacancy = services.standing_release(clinic=clinic, offer_ref=resolve_ref(clinic, Offer, data["offer"]),
                                               actor=request.user, reason=data["reason"])
    reopened = f" Vacancy {vacancy.ref} opened for the time." if vacancy else ""
    return {"ref": offer.ref, "status": offer.status, "vacancy": vacancy.ref if vacancy else None,
            "message": f"Automatic booking {_code(offer)} released: {_words(offer.status)}.{reopened}"}


def _words(code: str, kind: str = "") -> str:
    """A state in the glossary's words, lower-case inside a sentence (``is cancelled``); the code stays in the
    answer's ``status`` and in the result's tag."""
    from operations.labels import code_label

    label = code_label(code, kind=kind)
    return label[:1].lower() + label[1:] if label != code else code


def _booked_code(clinic: Clinic, appointment_ref: str) -> str:
    code = Appointment.objects.filter(clinic=clinic, ref=appointment_ref).values_list("code", flat=True).first()
    return display_code(clinic, code or "") or appointment_ref


def _code(obj) -> str:
    """The row's short code as a person reads it (read again: an insert leaves it to PostgreSQL), else its ref."""
    if obj is None:
        return "—"
    code = type(obj)._default_manager.filter(pk=obj.pk).values_list("code", flat=True).first() or ""
    return display_code(obj.clinic, code) or obj.ref


@dataclass(frozen=True)
class Verb:
    name: str
    command: str  # scheduling.scoping.COMMAND_ROLES
    title: str
    submit: str
    form: type[DeskForm]
    run: Callable[[HttpRequest, Clinic, dict, str], dict]
    #: What the audit row keeps as the reason.
    evidence: Callable[[dict], str]
    tone: str = "primary"


VERBS: dict[str, Verb] = {v.name: v for v in (
    Verb("cancel", "appointment_cancel", "Cancel an appointment", "Cancel appointment", CancelForm, _cancel,
         lambda d: f"{d['reason_code']}: {d['reason']}", tone="danger"),
    Verb("entry", "entry_create", "Add a patient to the waitlist", "Add to waitlist", EntryForm, _entry,
         lambda d: "added at the front desk"),
    Verb("accept", "offer_claim", "Take the patient's yes", "Accept for the patient", OfferPhoneForm, _accept,
         _evidence),
    Verb("late_yes", "offer_late_accept", "Take a late yes", "Take the late yes", OfferPhoneForm, _late_yes,
         _evidence),
    Verb("decline", "offer_decline", "Decline for the patient", "Decline for the patient", DeclineForm, _decline,
         lambda d: _evidence(d, d["reason"]), tone="danger"),
    Verb("standing", "standing_acceptance_record", "Record \u201cbook me automatically\u201d", "Record",
         StandingForm, _standing, _evidence),
    Verb("release", "standing_release", "Release an automatic booking", "Release", ReleaseForm, _release,
         lambda d: _evidence(d, d["reason"]), tone="danger"),
)}


#: The fields a link may fill in (``?appointment=apt_…`` from an appointment's page): refs and codes only.
PREFILL_FIELDS = ("appointment", "offer", "entry")


def _prefill(request: HttpRequest, verb: Verb) -> dict:
    fields = verb.form.base_fields
    return {k: request.GET[k][:40] for k in PREFILL_FIELDS if k in fields and k in request.GET}


def _form(verb: Verb, clinic: Clinic, user, data=None, initial: dict | None = None) -> forms.Form:
    kwargs: dict = {"prefix_id": f"desk-{verb.name}"}
    if initial:
        kwargs["initial"] = {"idempotency_key": new_idempotency_key(), **initial}
    if verb.form is EntryForm:
        kwargs.update(
            treatments=Treatment.objects.filter(clinic=clinic).order_by("name", "id").values_list("ref", "name"),
            practitioners=Practitioner.objects.filter(clinic=clinic).order_by("name", "id").values_list("ref", "name"),
            may_prioritise=may_run(user, clinic, "entry_set_priority"))
    return verb.form(data, **kwargs)


def _card(verb: Verb, clinic: Clinic, form: forms.Form, **extra) -> dict:
    return {"verb": verb, "form": form, "clinic": clinic,
            "url": reverse("console:desk-verb-" + verb.name, kwargs={"clinic_ref": clinic.ref}), **extra}


@clinic_view()
def desk_page(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    """The front desk's verbs; a verb this user's role may not run is not shown (the POST is a 403 anyway)."""
    cards = [_card(v, clinic, _form(v, clinic, request.user, initial=_prefill(request, v))) for v in VERBS.values()
             if may_run(request.user, clinic, v.command)]
    hidden = [v.title for v in VERBS.values() if not may_run(request.user, clinic, v.command)]
    return render_clinic_page(request, PAGE, clinic, "desk", {"cards": cards, "hidden": hidden})


def _verb_view(verb: Verb):
    @clinic_view(command=verb.command, methods=("POST",))
    def view(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
        form = _form(verb, clinic, request.user, request.POST)
        if not form.is_valid():
            return render(request, f"{PAGE}#verb", _card(verb, clinic, form), status=200)
        data = form.cleaned_data
        correlation_id = new_correlation_id()
        outcome = run_command(
            request, clinic, command=verb.command, key=data["idempotency_key"],
            parts=tuple(str(v) for k, v in sorted(data.items()) if k != "idempotency_key"),
            execute=lambda: {**verb.run(request, clinic, data, correlation_id), "correlation_id": correlation_id},
            audit_reason=verb.evidence(data),
        )
        if not outcome.ok:
            return refused(request, outcome)
        context = _card(verb, clinic, _form(verb, clinic, request.user), result=outcome.body,
                        replayed=outcome.replayed)
        if not request.htmx:
            return render_clinic_page(request, PAGE, clinic, "desk", {"cards": [context], "hidden": []})
        response = render(request, f"{PAGE}#verb", context)
        response["HX-Trigger"] = json.dumps({CHANGED_EVENT: True})
        return with_toast(response, outcome.body["message"], level="success")

    view.__name__ = view.__qualname__ = f"desk_{verb.name}"
    view.__doc__ = f"{verb.title} (``{verb.command}``), through the console's command runner."
    return view


DESK_VIEWS = {name: _verb_view(verb) for name, verb in VERBS.items()}
