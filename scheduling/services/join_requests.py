"""A patient's own join request while its contact is unproven: the only writer of ``JoinRequest`` rows.

The waitlist (``waitlist.joining``) decides what a request may ask for and what a verified one becomes; this
module keeps the contact and the one-time code: made when the code's notice is sent (never stored in clear,
an HMAC of the request's ref and the code under the project's secret), 10 minutes to use it, 5 tries, a few
sends with a pause between them, and the row deleted once its contact has moved to a patient or after a day.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from common.cas import cas_update
from common.errors import Conflict, NotFound, PatientDuplicate

from ..models import (
    Clinic,
    ConsentSource,
    ConsentState,
    ContactChannel,
    JoinRequest,
    JoinRequestStatus,
    Patient,
    Treatment,
)
from .consent import consent_record
from .patients import patient_create

CODE_DIGITS = 6
CODE_VALID = timedelta(minutes=10)
CODE_TRIES = 5
#: Sends of a code per request (the first included), and the pause a resend waits after the last one.
CODE_SENDS = 3
RESEND_AFTER = timedelta(seconds=60)
#: How long any request (its contact) is kept; a verified one awaiting staff approval a while longer.
REQUEST_KEPT = timedelta(hours=24)
APPROVAL_KEPT = timedelta(days=14)


class CodeOutcome:
    OK = "OK"
    WRONG = "CODE_INVALID"
    EXPIRED = "CODE_EXPIRED"
    EXHAUSTED = "CODE_EXHAUSTED"


def code_hash(ref: str, code: str) -> str:
    return hmac.new(settings.SECRET_KEY.encode(), f"{ref}:{code}".encode(), hashlib.sha256).hexdigest()


def join_request_create(*, clinic: Clinic, treatment: Treatment, display_name: str, phone: str, email: str,
                        language: str, details: dict, now: datetime) -> JoinRequest:
    """Record a request (PENDING, no code yet: its notice makes one when it is sent)."""
    if treatment.clinic_id != clinic.pk:
        raise NotFound()
    return JoinRequest.objects.create(
        clinic=clinic, treatment=treatment, display_name=display_name.strip()[:200], phone=phone, email=email,
        language=language, details=details, code_sends=1, created_at=now, expires_at=now + REQUEST_KEPT,
    )


@dataclass(frozen=True)
class IssuedCode:
    request: JoinRequest
    code: str


def join_request_issue_code(*, ref: str, now: datetime) -> IssuedCode | None:
    """A fresh code for a PENDING request, replacing any earlier one (its tries start again); None when the
    request is gone or past its code stage. Called at send time, so the code exists in clear only on its way."""
    code = f"{secrets.randbelow(10 ** CODE_DIGITS):0{CODE_DIGITS}d}"
    with transaction.atomic():
        request = (JoinRequest.objects.select_for_update(no_key=True, of=("self",)).select_related("clinic")
                   .filter(ref=ref, status=JoinRequestStatus.PENDING, expires_at__gt=now).first())
        if request is None:
            return None
        cas_update(request, code_hash=code_hash(ref, code), code_expires_at=now + CODE_VALID, code_attempts=0,
                   code_sent_at=now)
    return IssuedCode(request=request, code=code)


def join_request_resend(*, clinic: Clinic, ref: str, now: datetime) -> JoinRequest:
    """Count one more send of a PENDING request's code: 429 ``CODE_RESEND_LIMITED`` after ``CODE_SENDS`` or
    sooner than ``RESEND_AFTER`` since the last one (or while the last has not gone out yet)."""
    with transaction.atomic():
        request = _locked(clinic, ref, now)
        if request.status != JoinRequestStatus.PENDING:
            raise Conflict("The request is already verified.", code="REQUEST_VERIFIED")
        if (request.code_sends >= CODE_SENDS or request.code_sent_at is None
                or now - request.code_sent_at < RESEND_AFTER):
            raise ResendLimited("No more codes can be sent for this request now.")
        cas_update(request, code_sends=request.code_sends + 1)
        return request


class ResendLimited(Conflict):
    status_code = 429
    code = "CODE_RESEND_LIMITED"


def _locked(clinic: Clinic, ref: str, now: datetime) -> JoinRequest:
    request = (JoinRequest.objects.select_for_update(no_key=True, of=("self",)).select_related("treatment")
               .filter(clinic=clinic, ref=ref, expires_at__gt=now).first())
    if request is None:
        raise NotFound()
    return request


def join_request_check_code(*, clinic: Clinic, ref: str, code: str, now: datetime) -> tuple[str, JoinRequest]:
    """Lock the PENDING request and judge ``code``: ``(CodeOutcome.OK, request)`` or the refusal's code, with a
    wrong guess counted (the caller commits it before it refuses). 404 for an unknown ref, 409
    ``REQUEST_VERIFIED`` for one already verified. Call inside the caller's transaction."""
    request = _locked(clinic, ref, now)
    if request.status != JoinRequestStatus.PENDING:
        raise Conflict("The request is already verified.", code="REQUEST_VERIFIED")
    if request.code_attempts >= CODE_TRIES:
        return CodeOutcome.EXHAUSTED, request
    if not request.code_hash or request.code_expires_at is None or request.code_expires_at <= now:
        return CodeOutcome.EXPIRED, request
    if not (isinstance(code, str) and hmac.compare_digest(request.code_hash, code_hash(ref, code))):
        cas_update(request, code_attempts=request.code_attempts + 1)
        return CodeOutcome.WRONG, request
    return CodeOutcome.OK, request


def join_request_await_approval(request: JoinRequest, *, now: datetime) -> None:
    """Verified, and the clinic approves self-service joins first: kept (with its contact) for staff a while."""
    cas_update(request, status=JoinRequestStatus.AWAITING_APPROVAL, code_hash="", expires_at=now + APPROVAL_KEPT)


def join_request_patient(request: JoinRequest, *, now: datetime) -> Patient:
    """The clinic's patient with the request's verified contact (the one its code went to), else a new patient
    with the request's name and contacts (a second contact that another patient already uses is left out).
    The channels the request consented to are recorded GRANTED as the patient's own consent, with the request's
    ref as evidence. Call inside the caller's transaction (with the request locked)."""
    verified = Q(phone=request.phone) if request.verify_channel == ContactChannel.SMS else Q(
        email__iexact=request.email)
    patient = Patient.objects.filter(verified, clinic_id=request.clinic_id).first()
    if patient is None:
        phone, email = request.phone, request.email
        others = Patient.objects.filter(clinic_id=request.clinic_id)
        if email and request.verify_channel == ContactChannel.SMS and others.filter(email__iexact=email).exists():
            email = ""
        if phone and request.verify_channel == ContactChannel.EMAIL and others.filter(phone=phone).exists():
            phone = ""
        try:
            patient = patient_create(clinic=request.clinic, display_name=request.display_name, email=email,
                                     phone=phone, language=request.language)
        except PatientDuplicate:  # a twin request of the same contact made the patient a moment ago: join it
            patient = Patient.objects.filter(verified, clinic_id=request.clinic_id).first()
            if patient is None:
                raise
    channels = [c for c in request.details.get("consents", []) if c in ContactChannel.values]
    if channels:
        consent_record(patient=patient, channels=channels, state=ConsentState.GRANTED,
                       source=ConsentSource.PATIENT_CONSENT, actor_label="patient",
                       evidence=f"join request {request.ref} (contact verified by code)", now=now)
    return patient


def join_request_delete(request: JoinRequest) -> None:
    """The request's contact has moved to a patient record (or the request was refused): nothing is kept."""
    JoinRequest.objects.filter(pk=request.pk).delete()


def join_requests_purge(*, now: datetime) -> int:
    """Delete every request past its keeping time (beat): an unverified one a day after it was made."""
    deleted, _ = JoinRequest.objects.filter(expires_at__lte=now).delete()
    return deleted
