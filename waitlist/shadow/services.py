"""Shadow policy: publish a candidate policy, observe it on every dispatch, promote it or discard it.

``shadow_observe`` is the one hook in dispatch: called inside the promotion's transaction (after the
hold is placed, before the offer row), it runs the matcher with the shadow's fields and records whom
the shadow would have offered. It writes only its observation row: no offer, hold, notice or entry
change. Limits (docs/waitlist.md "Shadow policy"): the entry's stored ``suppressed_until`` came from
the enforced policy's decline hours, and a shadow ``min_lead_minutes`` cannot be observed per
dispatch (it decides whether a vacancy opens at all).
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from common.errors import Conflict, NotFound, ValidationFailed
from common.services import audit_record, new_correlation_id
from scheduling.models import Clinic
from waitlist.dispatch import matcher
from waitlist.models import (
    DecisionGate,
    DecisionStatus,
    NonFreshAction,
    ShadowObservation,
    ShadowPolicy,
    ShadowStatus,
    Vacancy,
    WaitlistEntry,
    WaitlistPolicy,
)
from waitlist.policy.services import policy_current, policy_publish
from waitlist.reliability.feed import get_decision_provider


def _policy_values(policy: WaitlistPolicy) -> dict:
    return {name: getattr(policy, name) for name in WaitlistPolicy.DIGEST_FIELDS if name != "version"}


def _validated(clinic: Clinic, values: dict) -> None:
    """The same field validation a published policy gets (a shadow must be promotable as is)."""
    from django.core.exceptions import ValidationError

    try:
        WaitlistPolicy(clinic=clinic, version=1, **values).full_clean(exclude=["clinic", "version"])
    except ValidationError as exc:
        raise ValidationFailed(fields={k: [str(m) for m in v] for k, v in exc.message_dict.items()}) from exc


def shadow_publish(*, clinic: Clinic, actor, reason: str, changes: dict, now: datetime | None = None,
                   correlation_id: str = "") -> ShadowPolicy:
    """ADMIN: a candidate policy in SHADOW (one per clinic: 409 SHADOW_EXISTS), audited."""
    now = now or timezone.now()
    current = policy_current(clinic=clinic)
    values = _policy_values(current)
    unknown = sorted(set(changes) - set(values))
    if unknown:
        raise ValidationFailed(fields={name: ["Not a policy field."] for name in unknown})
    values.update(changes)
    _validated(clinic, values)
    try:
        with transaction.atomic():
            shadow = ShadowPolicy.objects.create(
                clinic=clinic, fields=values, base_version=current.version, created_at=now,
                changes={k: v for k, v in changes.items() if getattr(current, k) != v},
                created_by=actor if getattr(actor, "is_authenticated", False) else None,
            )
            audit_record(actor=actor, action="waitlist.shadow_policy_publish", clinic=clinic, target_ref=shadow.ref,
                         reason=reason, correlation_id=correlation_id or new_correlation_id(),
                         result={"changes": shadow.changes, "base_version": current.version})
            return shadow
    except IntegrityError as exc:
        raise Conflict("A shadow policy is already being observed.", code="SHADOW_EXISTS") from exc


def _decide(clinic: Clinic, ref: str) -> ShadowPolicy:
    shadow = ShadowPolicy.objects.select_for_update(no_key=True).filter(
        clinic=clinic, ref=ref if isinstance(ref, str) else ""
    ).first()
    if shadow is None:
        raise NotFound()
    if shadow.status != ShadowStatus.SHADOW:
        raise Conflict(f"The shadow policy is {shadow.status}.", code="SHADOW_NOT_ACTIVE")
    return shadow


def shadow_promote(*, clinic: Clinic, shadow_ref: str, actor, reason: str, now: datetime | None = None,
                   correlation_id: str = "") -> tuple[ShadowPolicy, WaitlistPolicy]:
    """ADMIN: enforce the shadow's fields as a new policy version; audited with the observed agreement."""
    now = now or timezone.now()
    with transaction.atomic():
        shadow = _decide(clinic, shadow_ref)
        policy = policy_publish(clinic=clinic, **shadow.fields)
        shadow.status, shadow.decided_at, shadow.promoted_version = ShadowStatus.PROMOTED, now, policy.version
        shadow.save(update_fields=["status", "decided_at", "promoted_version"])
        observed = shadow.observations.count()
        agreed = shadow.observations.filter(agreed=True).count()
        audit_record(actor=actor, action="waitlist.shadow_policy_promote", clinic=clinic, target_ref=shadow.ref,
                     reason=reason, correlation_id=correlation_id or new_correlation_id(),
                     result={"policy_version": policy.version, "observations": observed, "agreed": agreed})
        return shadow, policy


def shadow_discard(*, clinic: Clinic, shadow_ref: str, actor, reason: str, now: datetime | None = None,
                   correlation_id: str = "") -> ShadowPolicy:
    """ADMIN: stop observing; the observations stay as history."""
    now = now or timezone.now()
    with transaction.atomic():
        shadow = _decide(clinic, shadow_ref)
        shadow.status, shadow.decided_at = ShadowStatus.DISCARDED, now
        shadow.save(update_fields=["status", "decided_at"])
        audit_record(actor=actor, action="waitlist.shadow_policy_discard", clinic=clinic, target_ref=shadow.ref,
                     reason=reason, correlation_id=correlation_id or new_correlation_id(), result={})
        return shadow


def _shadow_choice(vacancy: Vacancy, policy: WaitlistPolicy, now: datetime):
    """(outcome, candidate) the shadow's dispatch would reach, reading only (no lock, no write)."""
    provider = get_decision_provider()
    stats = matcher.MatchStats()
    for candidate in matcher.candidates(vacancy=vacancy, policy=policy, provider=provider, now=now, stats=stats):
        if policy.decision_gate == DecisionGate.NOT_USED:
            return "OFFERED", candidate
        decision = candidate.decision
        status = decision.effective_status(now) if decision else DecisionStatus.UNAVAILABLE
        if status == DecisionStatus.FRESH:
            return "OFFERED", candidate
        if policy.action_for(status) != NonFreshAction.NEXT_CANDIDATE:
            return "STAFF_REVIEW", candidate
    return "NO_CANDIDATE", None


def _difference(vacancy, enforced_entry, enforced: WaitlistPolicy, shadow: WaitlistPolicy, outcome, candidate, now):
    if outcome != "OFFERED":
        return f"SHADOW_{outcome}"
    blocked = matcher.ineligibility(entry=enforced_entry, vacancy=vacancy, policy=shadow, now=now)
    if blocked is not None:
        return f"ENFORCED_ENTRY_{blocked}"  # the shadow's rules would not have offered this entry
    other = WaitlistEntry.objects.get(pk=candidate.entry_id)
    skipped = matcher.ineligibility(entry=other, vacancy=vacancy, policy=enforced, now=now)
    return f"SHADOW_ENTRY_{skipped}" if skipped else "SHADOW_ENTRY_ORDER"


def shadow_preview(*, vacancy: Vacancy, entry: WaitlistEntry, policy: WaitlistPolicy, now: datetime) -> dict | None:
    """Read-only half of the hook, run before the enforced hold is placed, so the shadow judges the
    same state the enforced dispatch judged: whom the SHADOW policy would offer instead of ``entry``.
    None with no shadow published (one query)."""
    shadow = ShadowPolicy.objects.filter(clinic_id=vacancy.clinic_id, status=ShadowStatus.SHADOW).first()
    if shadow is None:
        return None
    candidate_policy = WaitlistPolicy(clinic_id=vacancy.clinic_id, version=0, **shadow.fields)
    outcome, candidate = _shadow_choice(vacancy, candidate_policy, now)
    agreed = outcome == "OFFERED" and candidate.entry_id == entry.pk
    reason = "" if agreed else _difference(vacancy, entry, policy, candidate_policy, outcome, candidate, now)
    return {
        "shadow": shadow, "clinic_id": vacancy.clinic_id, "vacancy": vacancy, "enforced_entry": entry,
        "shadow_entry_id": candidate.entry_id if candidate else None, "shadow_outcome": outcome,
        "agreed": agreed, "reason_code": reason, "created_at": now,
    }


def shadow_observe(*, preview: dict | None, correlation_id: str = "") -> ShadowObservation | None:
    """The dispatch hook's write (inside its transaction, once the offer is certain)."""
    if preview is None:
        return None
    return ShadowObservation.objects.create(**preview, correlation_id=correlation_id)
