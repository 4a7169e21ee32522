"""Signed event intake: trust, privacy boundary, schema, fingerprint, scope, then inbox and head.

Every refusal becomes a quarantine case (bounded code, SHA-256 of the refused bytes) committed
before the error is raised; the raw body is never stored or logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.dateparse import parse_datetime

from common.bounds import event_range, within
from common.errors import DomainError, PayloadTooLarge
from common.services import new_correlation_id
from scheduling.models import Clinic, TenantGroup

from ..models import QUARANTINE_CATEGORY, InboxEvent, InboxStatus, QuarantineCase, QuarantineReason
from .jobs import record_revision
from .modes import quarantine_watch

logger = logging.getLogger(__name__)

EVENT_FIELDS = frozenset(
    {
        "eventId",
        "tenantGroupId",
        "clinicId",
        "patientReferenceFingerprint",
        "profileRevision",
        "materialChange",
        "assessmentRef",
        "assessmentHash",
        "occurredAt",
    }
)
# \A...\Z, not ^...$: "$" also matches before a trailing newline, which let "ref\n" through.
_TOKEN = re.compile(r"\A[A-Za-z0-9._:-]{1,100}\Z")
_REF = re.compile(r"\A[A-Za-z0-9_-]{1,40}\Z")
_HEX64 = re.compile(r"\A[0-9a-f]{64}\Z")
_SIGNATURE = re.compile(r"\Asha256=([0-9a-fA-F]{64})\Z")


class SignatureInvalid(DomainError):
    status_code = 401
    code = "SIGNATURE_INVALID"


class SchemaInvalid(DomainError):
    status_code = 400
    code = "SCHEMA_INVALID"


class ScopeInvalid(DomainError):
    status_code = 422
    code = "SCOPE_INVALID"


class PrivacyBoundary(DomainError):
    status_code = 422
    code = "PRIVACY_BOUNDARY"


class EventIdReused(DomainError):
    status_code = 422
    code = "EVENT_ID_REUSED"


_ERROR_FOR = {
    QuarantineReason.SIGNATURE_INVALID: SignatureInvalid,
    QuarantineReason.KEY_UNKNOWN: SignatureInvalid,
    QuarantineReason.ISSUER_INVALID: SignatureInvalid,
    QuarantineReason.AUDIENCE_INVALID: SignatureInvalid,
    QuarantineReason.SCHEMA_INVALID: SchemaInvalid,
    QuarantineReason.FINGERPRINT_INVALID: SchemaInvalid,
    QuarantineReason.SCOPE_INVALID: ScopeInvalid,
    QuarantineReason.PRIVACY_BOUNDARY: PrivacyBoundary,
    QuarantineReason.EVENT_ID_REUSED: EventIdReused,
}


@dataclass(frozen=True)
class IntakeResult:
    status: str  # ACCEPTED or DUPLICATE
    job_ref: str | None = None
    job_state: str | None = None
    quarantine_ref: str | None = None


def hmac_keys() -> dict[str, bytes]:
    """``REEVALUATION_HMAC_KEYS`` as {key_id: secret}; several keys are live during a rotation."""
    keys: dict[str, bytes] = {}
    for item in settings.REEVALUATION_HMAC_KEYS:
        key_id, sep, secret = str(item).strip().partition(":")
        if sep and key_id and secret:
            keys[key_id] = secret.encode()
    return keys


def sign(body: bytes, secret: str | bytes) -> str:
    secret = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def signed_headers(body: bytes, *, key_id: str = "", secret: str = "") -> dict[str, str]:
    """Headers a CRM (or the demo) sends; defaults to the first configured key."""
    if not key_id:
        key_id, secret_bytes = next(iter(hmac_keys().items()))
        secret = secret_bytes.decode()
    return {
        "X-Signature": sign(body, secret),
        "X-Key-Id": key_id,
        "X-Issuer": settings.REEVALUATION_ISSUER,
        "X-Audience": settings.REEVALUATION_AUDIENCE,
    }


class _Refused(Exception):
    def __init__(self, reason: str, **attribution):
        super().__init__(reason)
        self.reason = reason
        self.attribution = attribution


class _TooLarge(_Refused):
    """Over the size limit: quarantined as SCHEMA_INVALID, answered 413 PAYLOAD_TOO_LARGE."""

    def __init__(self):
        super().__init__(QuarantineReason.SCHEMA_INVALID)


def _check_trust(body: bytes, headers) -> str:
    key_id = headers.get("X-Key-Id") or ""
    secret = hmac_keys().get(key_id)
    if secret is None:
        raise _Refused(QuarantineReason.KEY_UNKNOWN)
    match = _SIGNATURE.match(headers.get("X-Signature") or "")
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if match is None or not hmac.compare_digest(match.group(1).lower(), expected):
        raise _Refused(QuarantineReason.SIGNATURE_INVALID, key_id=key_id)
    if not hmac.compare_digest(
        (headers.get("X-Issuer") or "").encode(), settings.REEVALUATION_ISSUER.encode()
    ):
        raise _Refused(QuarantineReason.ISSUER_INVALID, key_id=key_id)
    if not hmac.compare_digest(
        (headers.get("X-Audience") or "").encode(), settings.REEVALUATION_AUDIENCE.encode()
    ):
        raise _Refused(QuarantineReason.AUDIENCE_INVALID, key_id=key_id)
    return key_id


def _scope(data: dict) -> tuple[TenantGroup | None, Clinic | None]:
    tg_ref, clinic_ref = data.get("tenantGroupId"), data.get("clinicId")
    if not (
        isinstance(tg_ref, str)
        and _REF.match(tg_ref)
        and isinstance(clinic_ref, str)
        and _REF.match(clinic_ref)
    ):
        return None, None
    clinic = Clinic.objects.select_related("tenant_group").filter(ref=clinic_ref).first()
    if clinic is None or clinic.tenant_group.ref != tg_ref:
        return None, None
    return clinic.tenant_group, clinic


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate(body: bytes) -> tuple[dict, datetime]:
    if len(body) > settings.REEVALUATION_MAX_BODY_BYTES:
        raise _TooLarge()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: absurdly nested input is bad input, not a 500
        raise _Refused(QuarantineReason.SCHEMA_INVALID) from None
    if not isinstance(data, dict):
        raise _Refused(QuarantineReason.SCHEMA_INVALID)
    event_id = (
        data.get("eventId") if isinstance(data.get("eventId"), str) and _TOKEN.match(data["eventId"]) else ""
    )
    # Anything beyond the minimum payload (a name, phone, profile, features, score...) is raw profile
    # data crossing the boundary: a privacy incident, not a schema nit.
    if set(data) - EVENT_FIELDS:
        tg, clinic = _scope(data)
        raise _Refused(QuarantineReason.PRIVACY_BOUNDARY, event_id=event_id, tenant_group=tg, clinic=clinic)
    try:
        occurred = parse_datetime(data["occurredAt"]) if isinstance(data.get("occurredAt"), str) else None
    except ValueError:  # well-formed but impossible, e.g. month 13
        occurred = None
    if occurred is not None and not within(occurred, event_range()):
        occurred = None  # year 10000 in UTC would store, then fail every read: refuse it here
    valid = (
        bool(event_id)
        and isinstance(data.get("tenantGroupId"), str)
        and isinstance(data.get("clinicId"), str)
        and isinstance(data.get("patientReferenceFingerprint"), str)
        and _is_int(data.get("profileRevision"))
        and 0 <= data["profileRevision"] < 2**62
        and isinstance(data.get("materialChange"), bool)
        and isinstance(data.get("assessmentRef"), str)
        and bool(_TOKEN.match(data["assessmentRef"]))
        and isinstance(data.get("assessmentHash"), str)
        and bool(_HEX64.match(data["assessmentHash"]))
        and occurred is not None
        and occurred.tzinfo is not None
    )
    if not valid:
        raise _Refused(QuarantineReason.SCHEMA_INVALID, event_id=event_id)
    if not _HEX64.match(data["patientReferenceFingerprint"]):
        raise _Refused(QuarantineReason.FINGERPRINT_INVALID, event_id=event_id)
    return data, occurred


def _quarantine(body: bytes, refused: _Refused, *, size: int | None = None) -> QuarantineCase:
    attribution = refused.attribution
    with transaction.atomic():
        case = QuarantineCase.objects.create(
            reason_code=refused.reason,
            category=QUARANTINE_CATEGORY[refused.reason],
            evidence_digest=hashlib.sha256(body).hexdigest(),
            evidence_size=len(body) if size is None else size,
            source="EVENT",
            event_id=attribution.get("event_id", ""),
            key_id=attribution.get("key_id", "")[:40],
            tenant_group=attribution.get("tenant_group"),
            clinic=attribution.get("clinic"),
            correlation_id=new_correlation_id(),
        )
        if case.clinic_id is not None:
            quarantine_watch(case.clinic_id)  # repeated quarantine drains the clinic (issue 13 part 2)
    logger.warning("reevaluation event quarantined reason=%s case=%s", case.reason_code, case.ref)
    return case


def event_intake(*, body: bytes, headers) -> IntakeResult:
    """Verify and record one CRM event. Raises a typed error (after quarantining) when refused."""
    try:
        key_id = _check_trust(body, headers)
        data, occurred = _validate(body)
        tenant_group, clinic = _scope(data)
        if clinic is None:
            raise _Refused(QuarantineReason.SCOPE_INVALID, event_id=data["eventId"], key_id=key_id)
        return _accept(body, data, occurred, key_id, clinic)
    except _Refused as refused:
        case = _quarantine(body, refused)
        raise _refusal_error(refused, case) from None


def _refusal_error(refused: _Refused, case: QuarantineCase) -> Exception:
    error = PayloadTooLarge if isinstance(refused, _TooLarge) else _ERROR_FOR[refused.reason]
    return error(f"Refused ({refused.reason}); quarantine case {case.ref}.")


def event_intake_oversized(*, size: int) -> None:
    """A body over the server's upload limit, never read: quarantine its declared size, then 413.

    The evidence digest is of the empty string (the bytes were not read, on purpose).
    """
    refused = _TooLarge()
    case = _quarantine(b"", refused, size=size)
    raise _refusal_error(refused, case)


def _accept(body: bytes, data: dict, occurred: datetime, key_id: str, clinic: Clinic) -> IntakeResult:
    digest = hashlib.sha256(body).hexdigest()
    with transaction.atomic():
        try:
            with transaction.atomic():
                # The unique event_id is the inbox fence: a concurrent twin waits here, then conflicts.
                event = InboxEvent.objects.create(
                    event_id=data["eventId"],
                    tenant_group=clinic.tenant_group,
                    clinic=clinic,
                    fingerprint=data["patientReferenceFingerprint"],
                    profile_revision=data["profileRevision"],
                    material_change=data["materialChange"],
                    occurred_at=occurred,
                    body_digest=digest,
                    key_id=key_id,
                    status=InboxStatus.ACCEPTED,
                )
        except IntegrityError:
            known = (
                InboxEvent.objects.filter(clinic=clinic, event_id=data["eventId"])
                .values_list("body_digest", flat=True)
                .first()
            )
            if known == digest:
                return IntakeResult(status="DUPLICATE")
            reused = True
        else:
            # Event ids are global at the CRM; one seen in another clinic is a reuse, not a new event.
            reused = InboxEvent.objects.filter(event_id=data["eventId"]).exclude(clinic=clinic).exists()
        if reused:
            raise _Refused(
                QuarantineReason.EVENT_ID_REUSED,
                event_id=data["eventId"],
                key_id=key_id,
                tenant_group=clinic.tenant_group,
                clinic=clinic,
            ) from None
        event.clinic = clinic
        job = record_revision(
            event=event, assessment_ref=data["assessmentRef"], assessment_hash=data["assessmentHash"]
        )
    if job is None:
        return IntakeResult(status="DUPLICATE")
    return IntakeResult(status="ACCEPTED", job_ref=job.ref, job_state=job.state)
