"""Signed event intake: trust, privacy boundary, schema, fingerprint, scope, then inbox and head.

Trust: an HMAC-SHA256 over the key id, issuer, audience and raw body (``signing_input``) with a key
from ``REEVALUATION_HMAC_KEYS``, which may be bound to tenant groups. Every trust failure gets the
same answer. Every refusal is counted per source (``QuarantineTally``) and becomes a quarantine case
(bounded code, SHA-256 of the refused bytes) committed before the error is raised, up to a rate per
source and minute, then a sample; the raw body is never stored or logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from common.bounds import event_range, within
from common.errors import DomainError, PayloadTooLarge
from common.services import new_correlation_id
from reevaluation import queries
from reevaluation.intake.heads import record_revision
from reevaluation.models import (
    QUARANTINE_CATEGORY,
    InboxEvent,
    InboxStatus,
    QuarantineCase,
    QuarantineCategory,
    QuarantineReason,
    QuarantineTally,
)
from reevaluation.modes.services import privacy_stop, quarantine_watch
from scheduling.models import Clinic, TenantGroup

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


def _refusal(name: str, status: int, code: str) -> type[DomainError]:
    """An intake refusal: a DomainError subclass with its own HTTP status and code."""
    return type(name, (DomainError,), {"status_code": status, "code": code, "__module__": __name__})


SignatureInvalid = _refusal("SignatureInvalid", 401, "SIGNATURE_INVALID")
SchemaInvalid = _refusal("SchemaInvalid", 400, "SCHEMA_INVALID")
ScopeInvalid = _refusal("ScopeInvalid", 422, "SCOPE_INVALID")
PrivacyBoundary = _refusal("PrivacyBoundary", 422, "PRIVACY_BOUNDARY")
EventIdReused = _refusal("EventIdReused", 422, "EVENT_ID_REUSED")


_ERROR_FOR: dict[str, type[DomainError]] = {
    QuarantineReason.SIGNATURE_INVALID: SignatureInvalid,
    QuarantineReason.KEY_UNKNOWN: SignatureInvalid,
    QuarantineReason.ISSUER_INVALID: SignatureInvalid,
    QuarantineReason.AUDIENCE_INVALID: SignatureInvalid,
    QuarantineReason.KEY_TENANT_MISMATCH: SignatureInvalid,
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


@dataclass(frozen=True)
class HmacKey:
    secret: bytes
    #: Tenant group refs this key may speak for; empty = any (the compatible two-part form).
    tenant_groups: frozenset[str] = frozenset()


_TENANT_BINDING = re.compile(r"^tg_[A-Za-z0-9_-]{1,37}(\|tg_[A-Za-z0-9_-]{1,37})*$")


def hmac_keys() -> dict[str, HmacKey]:
    """``REEVALUATION_HMAC_KEYS`` as {key_id: HmacKey}; several keys are live during a rotation.

    Each item is ``key_id:secret`` or ``key_id:secret:tg_a|tg_b`` (bound to those tenant groups).
    A trailing part is a binding only if it looks like tenant refs, so older secrets containing
    ``:`` keep working.
    """
    keys: dict[str, HmacKey] = {}
    for item in settings.REEVALUATION_HMAC_KEYS:
        key_id, sep, rest = str(item).strip().partition(":")
        secret, colon, binding = rest.rpartition(":")
        if not (colon and _TENANT_BINDING.match(binding)):
            secret, binding = rest, ""
        if sep and key_id and secret:
            keys[key_id] = HmacKey(secret.encode(), frozenset(filter(None, binding.split("|"))))
    return keys


def signing_input(body: bytes, *, key_id: str, issuer: str, audience: str) -> bytes:
    """What the signature covers: a version tag, the key id, issuer and audience, then the raw body.

    Swapping any of these headers in flight breaks the signature (issue 13 part 5).
    """
    head = "\n".join(("cw-event-v1", key_id, issuer, audience)) + "\n"
    return head.encode("utf-8", "replace") + body


def sign(body: bytes, secret: str | bytes, *, key_id: str, issuer: str = "", audience: str = "") -> str:
    secret = secret.encode() if isinstance(secret, str) else secret
    message = signing_input(
        body,
        key_id=key_id,
        issuer=issuer or settings.REEVALUATION_ISSUER,
        audience=audience or settings.REEVALUATION_AUDIENCE,
    )
    return "sha256=" + hmac.new(secret, message, hashlib.sha256).hexdigest()


def signed_headers(
    body: bytes, *, key_id: str = "", secret: str = "", tenant_group_ref: str = ""
) -> dict[str, str]:
    """Headers a CRM (or the demo) sends. Without ``key_id``: the first configured key that may
    speak for ``tenant_group_ref`` (an unbound key may speak for any)."""
    if not key_id:
        key_id, key = next(
            (kid, k)
            for kid, k in hmac_keys().items()
            if not k.tenant_groups or tenant_group_ref in k.tenant_groups
        )
        secret = key.secret.decode()
    return {
        "X-Signature": sign(body, secret, key_id=key_id),
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


#: Stands in for an unknown key so that refusing one costs the same HMAC as a wrong signature.
_NO_SUCH_KEY = HmacKey(b"\x00" * 32)


def _check_trust(body: bytes, headers) -> tuple[str, HmacKey]:
    key_id = headers.get("X-Key-Id") or ""
    issuer, audience = headers.get("X-Issuer") or "", headers.get("X-Audience") or ""
    key = hmac_keys().get(key_id)
    match = _SIGNATURE.match(headers.get("X-Signature") or "")
    expected = hmac.new(
        (key or _NO_SUCH_KEY).secret,
        signing_input(body, key_id=key_id, issuer=issuer, audience=audience),
        hashlib.sha256,
    ).hexdigest()
    signature_ok = match is not None and hmac.compare_digest(match.group(1).lower(), expected)
    if key is None:
        raise _Refused(QuarantineReason.KEY_UNKNOWN)
    if not hmac.compare_digest(issuer.encode(), settings.REEVALUATION_ISSUER.encode()):
        raise _Refused(QuarantineReason.ISSUER_INVALID, key_id=key_id)
    if not hmac.compare_digest(audience.encode(), settings.REEVALUATION_AUDIENCE.encode()):
        raise _Refused(QuarantineReason.AUDIENCE_INVALID, key_id=key_id)
    if not signature_ok:
        raise _Refused(QuarantineReason.SIGNATURE_INVALID, key_id=key_id)
    return key_id, key


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


def _validate(body: bytes, key_id: str = "", key: HmacKey | None = None) -> tuple[dict, datetime]:
    if len(body) > settings.REEVALUATION_MAX_BODY_BYTES:
        raise _TooLarge()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: absurdly nested input is bad input, not a 500
        raise _Refused(QuarantineReason.SCHEMA_INVALID) from None
    if not isinstance(data, dict):
        raise _Refused(QuarantineReason.SCHEMA_INVALID)
    if key is not None and key.tenant_groups and data.get("tenantGroupId") not in key.tenant_groups:
        # A genuine key speaking for a tenant it is not bound to: a trust failure, not a scope nit.
        raise _Refused(QuarantineReason.KEY_TENANT_MISMATCH, key_id=key_id)
    event_id = (
        data.get("eventId") if isinstance(data.get("eventId"), str) and _TOKEN.match(data["eventId"]) else ""
    )
    # Anything beyond the minimum payload (a name, phone, profile, features, score...) is raw profile
    # data crossing the boundary: a privacy incident, not a schema nit.
    if set(data) - EVENT_FIELDS:
        tg, clinic = _scope(data)
        raise _Refused(QuarantineReason.PRIVACY_BOUNDARY, event_id=event_id, tenant_group=tg, clinic=clinic,
                       key_id=key_id)
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
    return data, cast(datetime, occurred)  # checked in ``valid`` above


def _tally(source: str) -> tuple[int, bool]:
    """Count one refusal for ``source`` in this minute; whether its case row is stored.

    The first ``REEVALUATION_QUARANTINE_STORE_PER_MINUTE`` refusals of a source in a minute are
    stored, then one in ``REEVALUATION_QUARANTINE_SAMPLE_EVERY``; the count is never dropped.
    """
    window = timezone.now().replace(second=0, microsecond=0)
    refused = queries.quarantine_tally_count(source=source[:80], window=window)
    if refused == 1:  # a new source-minute: forget windows past the retention (an index range, usually empty)
        horizon = window - timedelta(days=settings.REEVALUATION_QUARANTINE_TALLY_DAYS)
        QuarantineTally.objects.filter(window_start__lt=horizon).delete()
    limit = settings.REEVALUATION_QUARANTINE_STORE_PER_MINUTE
    sample = max(1, settings.REEVALUATION_QUARANTINE_SAMPLE_EVERY)
    store = refused <= limit or (refused - limit) % sample == 0
    if store:
        QuarantineTally.objects.filter(source=source[:80], window_start=window).update(stored=F("stored") + 1)
    return refused, store


def _quarantine(body: bytes, refused: _Refused, source: str, *, size: int | None = None) -> QuarantineCase | None:
    """Count the refusal for its source and store the case unless the source is over its rate."""
    attribution = refused.attribution
    with transaction.atomic():
        count, store = _tally(source)
        case = None
        if store:
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
        trusted = bool(attribution.get("key_id")) and QUARANTINE_CATEGORY[refused.reason] != QuarantineCategory.TRUST
        if refused.reason == QuarantineReason.PRIVACY_BOUNDARY and trusted:
            # Signed by a key we hold: one case stops the consumer (the clinic's; without one, every clinic the
            # key is bound to), stored or not (issue 26 part 5).
            for clinic_id in _privacy_targets(attribution):
                privacy_stop(clinic_id, case_ref=case.ref if case else "", key_id=attribution["key_id"])
    if case is not None:
        logger.warning("reevaluation event quarantined reason=%s case=%s", case.reason_code, case.ref)
    elif count == settings.REEVALUATION_QUARANTINE_STORE_PER_MINUTE + 1:
        logger.warning("reevaluation quarantine rate reached for %s; storing a sample this minute", source)
    return case


def _privacy_targets(attribution: dict) -> list[int]:
    """The consumers a trusted privacy-boundary event stops: its clinic, or, when it names none we know,
    every clinic of the tenant groups its key is bound to (an unbound key with no clinic stops nothing:
    the case and its alert remain)."""
    clinic = attribution.get("clinic")
    if clinic is not None:
        return [clinic.pk]
    key = hmac_keys().get(attribution.get("key_id", ""))
    if key is None or not key.tenant_groups:
        return []
    clinics = Clinic.objects.filter(tenant_group__ref__in=key.tenant_groups).order_by("pk")
    return list(clinics.values_list("pk", flat=True))


#: The one answer to every trust failure: no hint whether the key id, signature, issuer, audience
#: or tenant binding was wrong (the quarantine row records which).
TRUST_FAILURE_DETAIL = "The event could not be verified."


def event_intake(*, body: bytes, headers, source_address: str = "") -> IntakeResult:
    """Verify and record one CRM event. Raises a typed error (after quarantining) when refused.

    ``source_address`` is the client address (``common.clientaddr``): unverified senders are
    rate-bounded per address, verified ones per key id.
    """
    key_id = ""
    try:
        key_id, key = _check_trust(body, headers)
        data, occurred = _validate(body, key_id, key)
        tenant_group, clinic = _scope(data)
        if clinic is None:
            raise _Refused(QuarantineReason.SCOPE_INVALID, event_id=data["eventId"], key_id=key_id)
        return _accept(body, data, occurred, key_id, clinic)
    except _Refused as refused:
        trust = QUARANTINE_CATEGORY[refused.reason] == QuarantineCategory.TRUST
        source = f"addr:{source_address}" if trust or not key_id else f"key:{key_id}"
        case = _quarantine(body, refused, source)
        if trust:
            raise SignatureInvalid(TRUST_FAILURE_DETAIL) from None
        raise _refusal_error(refused, case) from None


def _refusal_error(refused: _Refused, case: QuarantineCase | None) -> Exception:
    error = PayloadTooLarge if isinstance(refused, _TooLarge) else _ERROR_FOR[refused.reason]
    stored = f"quarantine case {case.ref}" if case else "counted; over the quarantine rate, not stored"
    return error(f"Refused ({refused.reason}); {stored}.")


def event_intake_oversized(*, size: int, source_address: str) -> None:
    """A body over the server's upload limit, never read: quarantine its declared size, then 413.

    The evidence digest is of the empty string (the bytes were not read, on purpose).
    """
    refused = _TooLarge()
    case = _quarantine(b"", refused, f"addr:{source_address}", size=size)
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
