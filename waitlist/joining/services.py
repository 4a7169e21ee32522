"""Self-service joining commands: the clinic's settings, a request, its code, and what a verified request becomes.

A request is kept in ``scheduling`` (``JoinRequest``: the only place for an unproven contact); this module decides
what a clinic lets patients ask for and turns a verified request into a WAITING entry through ``entry_create``,
matched to the clinic's patient with the verified contact or a new one, or leaves it for staff when the clinic
approves self-service joins first. Nothing but the request row is written before the code is proven.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from common.cas import cas_update
from common.errors import (
    Conflict,
    DomainError,
    EntryDuplicate,
    NotFound,
    ValidationFailed,
    constraint_violated,
)
from common.services import audit_record, new_correlation_id, outbox_enqueue
from scheduling.models import Clinic, JoinRequest, JoinRequestStatus, Patient, Practitioner, Treatment
from scheduling.scoping import require_command_role, scoped_get
from scheduling.services.join_requests import (
    CodeOutcome,
    join_request_await_approval,
    join_request_check_code,
    join_request_create,
    join_request_delete,
    join_request_patient,
    join_request_resend,
)
from waitlist.dispatch.locks import lock_entry
from waitlist.effects import queue_delivery
from waitlist.joining.availability import ANY_TIME
from waitlist.joining.models import JoinSettings
from waitlist.models import LIVE_ENTRY_STATUSES, EntryStatus, WaitlistEntry
from waitlist.services import entry_create, entry_withdraw

#: The outbox topic of a request's one-time code (payload: the request's ref only; the code is made at send time).
CODE_TOPIC = "waitlist.join_code"
#: The outbox topic of "you are on the list" with the status link (payload: refs only; the link is made at send time).
JOINED_TOPIC = "waitlist.joined"


class CodeRefused(DomainError):
    """A wrong, expired or used-up code (the wrong guess is counted and committed before this is raised)."""

    status_code = 400


CODE_STATUS = {CodeOutcome.WRONG: 400, CodeOutcome.EXPIRED: 410, CodeOutcome.EXHAUSTED: 429}
CODE_DETAIL = {
    CodeOutcome.WRONG: "The code is not right. Check the last message and try again.",
    CodeOutcome.EXPIRED: "The code has expired. Ask for a new one.",
    CodeOutcome.EXHAUSTED: "Too many wrong codes. Ask for a new one.",
}


def join_settings_for(clinic: Clinic) -> JoinSettings | None:
    return JoinSettings.objects.filter(clinic=clinic).first()


def joining_open(clinic: Clinic) -> JoinSettings:
    """The clinic's settings if patients may join by themselves; the 404 of a missing clinic otherwise (a clinic
    that has not switched it on looks like no clinic to the public)."""
    settings = join_settings_for(clinic)
    if settings is None or not settings.enabled:
        raise NotFound()
    return settings


def offered_treatments(settings: JoinSettings) -> list[Treatment]:
    return list(settings.treatments.order_by("name"))


def join_settings_set(*, clinic: Clinic, actor, reason: str, enabled: bool | None = None,
                      treatments: list[Treatment] | None = None, allowed_origins: list[str] | None = None,
                      approval_required: bool | None = None, upkeep_weeks: int | None = None,
                      upkeep_refreshes_wait: bool | None = None) -> JoinSettings:
    """ADMIN: switch self-service joining on or off and say what it offers; audited with before and after."""
    require_command_role(actor, clinic, "join_settings_set")
    if treatments is not None and any(t.clinic_id != clinic.pk for t in treatments):
        raise ValidationFailed(fields={"treatments": ["Not found in this clinic."]})
    with transaction.atomic():
        settings, _ = JoinSettings.objects.select_for_update(no_key=True).get_or_create(clinic=clinic)
        before = settings_body(settings)
        changes: dict[str, Any] = {name: value for name, value in (
            ("enabled", enabled), ("allowed_origins", allowed_origins), ("approval_required", approval_required),
            ("upkeep_weeks", upkeep_weeks), ("upkeep_refreshes_wait", upkeep_refreshes_wait)) if value is not None}
        if changes:
            cas_update(settings, **changes)
        if treatments is not None:
            settings.treatments.set(treatments)
        after = settings_body(settings)
        audit_record(actor=actor, action="waitlist.join_settings", clinic=clinic, target_ref=clinic.ref,
                     reason=reason, correlation_id=new_correlation_id(), result={"from": before, "to": after})
    return settings


def settings_body(settings: JoinSettings) -> dict:
    return {"enabled": settings.enabled, "treatments": sorted(settings.treatments.values_list("ref", flat=True)),
            "allowed_origins": list(settings.allowed_origins), "approval_required": settings.approval_required,
            "upkeep_weeks": settings.upkeep_weeks, "upkeep_refreshes_wait": settings.upkeep_refreshes_wait}


@dataclass(frozen=True)
class JoinAsk:
    """What a patient asks for (validated by the front end): refs resolved, dates as clinic-local bounds."""

    treatment: Treatment
    practitioner: Practitioner | None
    earliest: datetime
    latest: datetime
    availability: int
    display_name: str
    phone: str
    email: str
    language: str
    consents: list[str]
    source: str


def join_request_submit(*, clinic: Clinic, ask: JoinAsk, now: datetime | None = None) -> JoinRequest:
    """Record the request and queue its code's notice. 404 when the clinic does not take self-service requests,
    400 ``TREATMENT_NOT_OFFERED`` for a treatment it does not offer that way. Nothing is looked up by contact."""
    now = now or timezone.now()
    settings = joining_open(clinic)
    if not settings.treatments.filter(pk=ask.treatment.pk).exists():
        raise ValidationFailed("This treatment is not offered for joining the list online.",
                               code="TREATMENT_NOT_OFFERED", fields={"treatment": ["Not offered online."]})
    details = {
        "practitioner": ask.practitioner.ref if ask.practitioner else None,
        "earliest": ask.earliest.isoformat(), "latest": ask.latest.isoformat(),
        "availability": ask.availability, "consents": sorted(set(ask.consents)), "source": ask.source,
    }
    with transaction.atomic():
        request = join_request_create(clinic=clinic, treatment=ask.treatment, display_name=ask.display_name,
                                      phone=ask.phone, email=ask.email, language=ask.language, details=details,
                                      now=now)
        _queue_code(clinic, request)
    return request


def _queue_code(clinic: Clinic, request: JoinRequest) -> None:
    outbox_enqueue(topic=CODE_TOPIC, tenant_group_ref=clinic.tenant_group.ref, clinic_ref=clinic.ref,
                   aggregate_ref=request.ref, recipient_ref=request.ref, payload={"request": request.ref},
                   channel=request.verify_channel.lower())
    queue_delivery()


def join_code_resend(*, clinic: Clinic, ref: str, now: datetime | None = None) -> JoinRequest:
    """Send a new code (the old one stops working when it goes out); 429 ``CODE_RESEND_LIMITED`` past the limit."""
    now = now or timezone.now()
    joining_open(clinic)
    with transaction.atomic():
        request = join_request_resend(clinic=clinic, ref=ref, now=now)
        _queue_code(clinic, request)
    return request


@dataclass(frozen=True)
class Joined:
    """A verified request: its entry (WAITING, or the live one the patient already had), or None while it waits
    for staff approval; the patient it belongs to."""

    request_ref: str
    patient: Patient
    entry: WaitlistEntry | None


def join_request_verify(*, clinic: Clinic, ref: str, code: str, now: datetime | None = None) -> Joined | None:
    """Prove the request's contact with its code. Right: the request becomes an entry (or waits for approval) and
    its row is deleted; wrong, expired or used up: ``CodeRefused`` after the try is recorded."""
    now = now or timezone.now()
    settings = joining_open(clinic)
    with transaction.atomic():
        outcome, request = join_request_check_code(clinic=clinic, ref=ref, code=code, now=now)
        if outcome == CodeOutcome.OK:
            if settings.approval_required:
                join_request_await_approval(request, now=now)
                return None
            return _admit(clinic, request, actor=None, now=now)
    refusal = CodeRefused(CODE_DETAIL[outcome], code=outcome)
    refusal.status_code = CODE_STATUS[outcome]
    raise refusal


def _admit(clinic: Clinic, request: JoinRequest, *, actor, now: datetime) -> Joined:
    """Patient (matched or new), entry, consents; the request row deleted. Inside the caller's transaction."""
    details = request.details
    patient = join_request_patient(request, now=now)
    practitioner = (Practitioner.objects.filter(clinic=clinic, ref=details.get("practitioner")).first()
                    if details.get("practitioner") else None)
    earliest, latest = (datetime.fromisoformat(details["earliest"]), datetime.fromisoformat(details["latest"]))
    entry: WaitlistEntry | None
    try:
        with transaction.atomic():
            entry = entry_create(clinic=clinic, patient=patient, treatment=request.treatment, earliest=earliest,
                                 latest=latest, practitioner=practitioner, availability=details["availability"],
                                 now=now, actor=actor)
    except EntryDuplicate:  # the patient already waits for it: their place stands, their status page shows it
        entry = (WaitlistEntry.objects.filter(clinic=clinic, patient=patient, treatment=request.treatment,
                                              status__in=LIVE_ENTRY_STATUSES).order_by("pk").first())
    audit_record(actor=actor, action="waitlist.join_request_admitted", clinic=clinic,
                 target_ref=entry.ref if entry else request.ref, reason=f"join request {request.ref}",
                 correlation_id=new_correlation_id(), result={"request": request.ref, "patient": patient.ref,
                                                               "source": details.get("source", "")},
                 system_label="joining")
    join_request_delete(request)
    if entry is not None:
        outbox_enqueue(topic=JOINED_TOPIC, tenant_group_ref=clinic.tenant_group.ref, clinic_ref=clinic.ref,
                       aggregate_ref=entry.ref, recipient_ref=patient.ref,
                       payload={"entry": entry.ref, "patient": patient.ref})
        queue_delivery()
    return Joined(request_ref=request.ref, patient=patient, entry=entry)


def join_request_approve(*, clinic: Clinic, ref: str, actor, now: datetime | None = None) -> Joined:
    """STAFF: a verified request the clinic approves first becomes an entry (audited)."""
    require_command_role(actor, clinic, "join_request_approve")
    now = now or timezone.now()
    with transaction.atomic():
        request = _awaiting(clinic, ref)
        return _admit(clinic, request, actor=actor, now=now)


def join_request_reject(*, clinic: Clinic, ref: str, actor, reason: str) -> None:
    """STAFF: refuse a verified request; it is deleted with its contact (audited by ref)."""
    require_command_role(actor, clinic, "join_request_reject")
    with transaction.atomic():
        request = _awaiting(clinic, ref)
        audit_record(actor=actor, action="waitlist.join_request_rejected", clinic=clinic, target_ref=request.ref,
                     reason=reason, correlation_id=new_correlation_id())
        join_request_delete(request)


def _awaiting(clinic: Clinic, ref: str) -> JoinRequest:
    queryset = JoinRequest.objects.select_for_update(no_key=True, of=("self",)).select_related("treatment").filter(
        status=JoinRequestStatus.AWAITING_APPROVAL)
    return scoped_get(queryset, clinic, ref)


#: An upkeep question left unanswered pauses the entry until the patient (link) or staff resume it.
PAUSED_UNTIL_RESUMED = datetime(9999, 12, 31, tzinfo=UTC)


def _patient_entry(patient: Patient, entry_ref: str) -> WaitlistEntry:
    """The patient's own entry, locked: the same 404 for another patient's ref as for a missing one."""
    entry_id = (WaitlistEntry.objects.filter(clinic_id=patient.clinic_id, patient=patient, ref=entry_ref)
                .values_list("pk", flat=True).first())
    if entry_id is None:
        raise NotFound()
    return lock_entry(entry_id)


def _waiting(entry: WaitlistEntry) -> None:
    if entry.status != EntryStatus.WAITING:
        raise Conflict("A time is being offered or booked for this entry; change it after that.", code="ENTRY_BUSY")


def entry_patient_edit(*, patient: Patient, entry_ref: str, availability: int, earliest: datetime,
                       latest: datetime) -> WaitlistEntry:
    """The patient changes when they can come and their date range (status page): WAITING entries only (409
    ``ENTRY_BUSY`` while an offer is out); an overlap with another entry of theirs is 409 ``ENTRY_DUPLICATE``."""
    if latest <= earliest or not 0 < availability <= ANY_TIME:
        raise ValidationFailed(fields={"latest": ["Must be after the first day."]})
    try:
        with transaction.atomic():
            entry = _patient_entry(patient, entry_ref)
            _waiting(entry)
            cas_update(entry, availability=availability, earliest=earliest, latest=latest)
    except IntegrityError as exc:
        if constraint_violated(exc) != "wl_entry_one_live_per_window":
            raise
        raise EntryDuplicate("You already wait for this treatment on some of these days.") from None
    audit_record(actor=None, action="waitlist.entry_patient_edit", clinic=patient.clinic, target_ref=entry.ref,
                 correlation_id=new_correlation_id(), result={"availability": availability, "version": entry.version},
                 system_label="patient")
    return entry


def entry_patient_pause(*, patient: Patient, entry_ref: str, until: datetime | None) -> WaitlistEntry:
    """The patient pauses their entry until ``until`` (no offers before it), or resumes it (None)."""
    with transaction.atomic():
        entry = _patient_entry(patient, entry_ref)
        if entry.status in (EntryStatus.BOOKED, EntryStatus.WITHDRAWN):
            raise Conflict(f"The entry is {entry.status}.", code="ENTRY_CLOSED")
        cas_update(entry, paused_until=until)
        audit_record(actor=None, action="waitlist.entry_patient_pause", clinic=patient.clinic, target_ref=entry.ref,
                     correlation_id=new_correlation_id(), system_label="patient",
                     result={"paused_until": until.isoformat() if until else None})
    return entry


def entry_patient_leave(*, patient: Patient, entry_ref: str, words: str) -> WaitlistEntry:
    """The patient leaves the list; their own words are the withdrawal's reason (audited)."""
    entry_id = (WaitlistEntry.objects.filter(clinic_id=patient.clinic_id, patient=patient, ref=entry_ref)
                .values_list("pk", flat=True).first())
    if entry_id is None:
        raise NotFound()
    said = " ".join((words or "").split())[:180] or "no reason given"
    return entry_withdraw(clinic=patient.clinic, entry_ref=entry_ref, actor=None, reason=f"patient: {said}")
