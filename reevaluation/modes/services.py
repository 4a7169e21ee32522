"""Per-clinic mutation mode, drain state and due-time overrides: ADMIN commands with an audit row."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as dj_settings
from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, F
from django.db.models.functions import Greatest
from django.utils import timezone

from common.cas import cas_update, cas_update_all, transition_sources
from common.errors import Conflict, ValidationFailed
from common.services import audit_record, new_correlation_id
from reevaluation.models import (
    ROLLOUT_ORDER,
    ClinicReevaluationSettings,
    DrainCause,
    DrainState,
    JobState,
    MutationMode,
    PriorityClass,
    QuarantineCase,
    ReevaluationJob,
    drain_moves,
    mode_moves,
)
from scheduling.scoping import require_command_role

logger = logging.getLogger(__name__)

def rollout_path(current: str, target: str) -> list[str]:
    """The steps from ``current`` to ``target`` along the rollout order (for scripted rollouts)."""
    i, j = ROLLOUT_ORDER.index(current), ROLLOUT_ORDER.index(target)
    if j >= i:
        return list(ROLLOUT_ORDER[i + 1 : j + 1])
    return list(reversed(ROLLOUT_ORDER[j:i]))  # back one step at a time


def settings_for(clinic, *, lock: bool = False) -> ClinicReevaluationSettings:
    """The clinic's settings row, created on first use with the configured default mode.

    An existing row is read (or locked) without the INSERT: an ``ON CONFLICT`` probe would wait for
    any transaction that is updating the row (a job write-back), even for a plain read.
    """
    queryset = ClinicReevaluationSettings.objects.all()
    if lock:
        queryset = queryset.select_for_update(no_key=True)
    row = queryset.filter(clinic_id=clinic.pk).first()
    if row is not None:
        return row
    ClinicReevaluationSettings.objects.bulk_create([ClinicReevaluationSettings(  # ON CONFLICT DO NOTHING
        tenant_group_id=clinic.tenant_group_id, clinic_id=clinic.pk,
        mutation_mode=getattr(dj_settings, "REEVALUATION_DEFAULT_MODE", MutationMode.DISABLED),
        drain_state=DrainState.ACTIVE,
    )], ignore_conflicts=True)
    return queryset.get(clinic_id=clinic.pk)


def due_minutes(row: ClinicReevaluationSettings, priority_class: str) -> int:
    if priority_class == PriorityClass.HELD_PRESENT:
        return row.held_due_minutes or dj_settings.REEVALUATION_HELD_DUE_MINUTES
    return row.proposed_due_minutes or dj_settings.REEVALUATION_PROPOSED_DUE_MINUTES


def _require_role(actor, clinic, command: str) -> None:
    """``actor`` None is a system job (management command); a user needs the command's role."""
    if actor is not None:
        require_command_role(actor, clinic, command)


def _admin_command(clinic, actor, reason: str, field: str, value: str, choices: list[str], command: str) -> str:
    """The checks every ADMIN switch starts with; returns the cleaned reason."""
    _require_role(actor, clinic, command)
    reason = _check_reason(reason)
    if value not in choices:
        raise ValidationFailed(fields={field: [f"One of {', '.join(choices)}."]})
    return reason


def _unchanged(previous: str, target: str, what: str, code: str) -> str:
    """Asking for the current value is a 409 (nothing changes, no audit row); returns ``previous``."""
    if previous == target:
        raise Conflict(f"The {what} is already {target}.", code=code)
    return previous


def _audit(actor, action: str, clinic, reason: str, idempotency_key: str, result: dict) -> None:
    audit_record(
        actor=actor,
        action=f"reevaluation.{action}",
        clinic=clinic,
        reason=reason,
        idempotency_key=idempotency_key,
        result=result,
        system_label="reevaluation",
    )


def _check_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed(fields={"reason": ["A reason is required."]})
    return reason


def mode_set(
    *, clinic, mode: str, actor, reason: str, idempotency_key: str = ""
) -> ClinicReevaluationSettings:
    """Move the clinic's mutation mode one step along the rollout order, one step back, or to DISABLED.

    A no-op is ``MODE_UNCHANGED`` and any other move ``MODE_TRANSITION_INVALID`` (both 409, nothing
    changed, no audit row): the console offers exactly ``mode_moves(current)``.
    """
    reason = _admin_command(clinic, actor, reason, "mode", mode, MutationMode.values, "mode_set")
    with transaction.atomic():
        row = settings_for(clinic, lock=True)
        previous = _unchanged(row.mutation_mode, mode, "mode", "MODE_UNCHANGED")
        if mode not in mode_moves(previous):
            allowed = ", ".join(mode_moves(previous))
            raise Conflict(
                f"Cannot move from {previous} to {mode}; allowed: {allowed}.", code="MODE_TRANSITION_INVALID"
            )
        cas_update(row, mutation_mode=mode)
        _audit(actor, "mode_set", clinic, reason, idempotency_key, {"from": previous, "to": mode})
        return row


def drain_set(
    *, clinic, state: str, actor, reason: str, idempotency_key: str = ""
) -> ClinicReevaluationSettings:
    """ACTIVE → DRAINING (no new claims) → DRAINED (no active leases); either back to ACTIVE.

    Asking for DRAINING when no lease is active goes straight to DRAINED; asking for DRAINED while
    leases are active is a DRAIN_LEASES_ACTIVE conflict (the beat finishes the drain instead).
    """
    reason = _admin_command(clinic, actor, reason, "state", state, DrainState.values, "drain_set")
    with transaction.atomic():
        row = settings_for(clinic, lock=True)
        previous = _unchanged(row.drain_state, state, "drain state", "DRAIN_UNCHANGED")
        transition_sources(ClinicReevaluationSettings, state, previous, code="DRAIN_TRANSITION_INVALID")
        running = ReevaluationJob.objects.filter(clinic_id=clinic.pk, state=JobState.RUNNING).exists()
        if state == DrainState.DRAINED and running:
            raise Conflict("Leases are still active.", code="DRAIN_LEASES_ACTIVE")
        target = DrainState.DRAINED if state == DrainState.DRAINING and not running else state
        _drain_move(row, target, _drain_cause(row, target, DrainCause.ADMIN))
        _audit(actor, "drain_set", clinic, reason, idempotency_key, {"from": previous, "to": row.drain_state})
        return row


def _drain_move(row: ClinicReevaluationSettings, target: str, cause: dict) -> None:
    """CAS the drain state to ``target``; from ACTIVE to DRAINED (nothing running) through DRAINING, the
    only way ``DRAIN_TRANSITIONS`` allows it."""
    if row.drain_state == DrainState.ACTIVE and target == DrainState.DRAINED:
        cas_update(row, drain_state=DrainState.DRAINING)
    cas_update(row, drain_state=target, **cause)


def _drain_cause(row: ClinicReevaluationSettings, target: str, cause: str, detail: dict | None = None) -> dict:
    """The cause columns for a move to ``target``: cleared on ACTIVE, kept while an existing drain
    only progresses (DRAINING → DRAINED), else set to ``cause``."""
    now = timezone.now()
    if target == DrainState.ACTIVE:
        return {"drain_cause": "", "drain_detail": {}, "drain_changed_at": now}
    if row.drain_state != DrainState.ACTIVE and row.drain_cause:
        return {"drain_changed_at": now}
    return {"drain_cause": cause, "drain_detail": detail or {}, "drain_changed_at": now}


def quarantine_watch(clinic_id: int, *, now: datetime | None = None) -> bool:
    """Drain an ACTIVE clinic whose quarantine repeats; call it in the transaction that records a case.

    More than ``REEVALUATION_AUTO_DRAIN_QUARANTINE_THRESHOLD`` cases within the window (counted from
    the last resume at the latest) → DRAINING (DRAINED when nothing runs), cause QUARANTINE_REPEATED,
    an audit row and a warning log line. Only an ADMIN's ``drain_set(ACTIVE)`` resumes it. Returns
    True when this call drained the clinic.
    """
    now = now or timezone.now()
    threshold = dj_settings.REEVALUATION_AUTO_DRAIN_QUARANTINE_THRESHOLD
    window = dj_settings.REEVALUATION_AUTO_DRAIN_WINDOW_MINUTES
    row = ClinicReevaluationSettings.objects.select_for_update(no_key=True).filter(clinic_id=clinic_id).first()
    if row is None:
        from scheduling.models import Clinic

        row = settings_for(Clinic.objects.get(pk=clinic_id), lock=True)
    if row.drain_state != DrainState.ACTIVE:
        return False
    since = now - timedelta(minutes=window)
    if row.drain_changed_at is not None and row.drain_changed_at > since:
        since = row.drain_changed_at  # cases before an ADMIN's resume were already looked at
    cases = QuarantineCase.objects.filter(clinic_id=clinic_id, created_at__gt=since)
    count = cases.count()
    if count <= threshold:
        return False
    latest: Any = cases.order_by("-created_at", "-id").values("ref", "reason_code").first()
    detail = {
        "quarantine_count": count,
        "threshold": threshold,
        "window_minutes": window,
        "latest_case": latest["ref"],
        "latest_reason_code": latest["reason_code"],
    }
    _stop_automatically(row, DrainCause.QUARANTINE_REPEATED, detail, action="reevaluation.auto_drain",
                        reason=f"{count} quarantine cases in {window} min (threshold {threshold})")
    # The alert: an operator (or the metrics gauge, ``selectors.drained_clinics``) picks this up.
    logger.warning(
        "reevaluation clinic drained automatically clinic_id=%s cause=%s count=%s", clinic_id,
        DrainCause.QUARANTINE_REPEATED, count,
    )
    return True


def _stop_automatically(row: ClinicReevaluationSettings, cause: str, detail: dict, *, action: str,
                        reason: str) -> None:
    """The consumer stops itself (no actor): ACTIVE → DRAINING while jobs still run, else DRAINED, with ``cause``
    and ``detail`` on the row and an audit row (``action``, ``reason``). The caller holds the row's lock."""
    running = ReevaluationJob.objects.filter(clinic_id=row.clinic_id, state=JobState.RUNNING).exists()
    target = DrainState.DRAINING if running else DrainState.DRAINED
    _drain_move(row, target, _drain_cause(row, target, cause, detail))
    audit_record(actor=None, action=action, clinic=row.clinic, reason=reason, correlation_id=new_correlation_id(),
                 result={"to": target, **detail}, system_label="reevaluation")


def privacy_stop(clinic_id: int, *, case_ref: str = "", key_id: str = "", source: str = "EVENT") -> bool:
    """Stop the clinic's consumer at once: raw patient data crossed the boundary from a source we trust
    (a correctly signed event, or the CRM's own assessment API). One case is an incident, not noise, so
    no threshold applies (TRUST failures from unknown senders keep ``quarantine_watch``'s threshold and
    never come here). ACTIVE → DRAINING/DRAINED, cause PRIVACY_BOUNDARY, an audit row and a warning;
    only an ADMIN's ``drain_set(ACTIVE)`` (console or API) resumes it. Call it in the transaction that
    records the case. True when this call stopped the clinic."""
    from scheduling.models import Clinic

    row = ClinicReevaluationSettings.objects.select_for_update(no_key=True).filter(clinic_id=clinic_id).first()
    if row is None:
        row = settings_for(Clinic.objects.get(pk=clinic_id), lock=True)
    detail = {"latest_case": case_ref, "latest_reason_code": "PRIVACY_BOUNDARY", "key_id": key_id[:40],
              "source": source}
    if row.drain_state != DrainState.ACTIVE:
        if row.drain_cause != DrainCause.PRIVACY_BOUNDARY:
            # Already stopped for another reason: the privacy incident becomes the cause to clear.
            cas_update(row, drain_cause=DrainCause.PRIVACY_BOUNDARY, drain_detail=detail)
        return False
    _stop_automatically(row, DrainCause.PRIVACY_BOUNDARY, detail, action="reevaluation.privacy_stop",
                        reason=f"PRIVACY_BOUNDARY from a trusted source ({source}), case {case_ref or 'not stored'}")
    logger.warning("reevaluation clinic stopped at once clinic_id=%s cause=%s case=%s", clinic_id,
                   DrainCause.PRIVACY_BOUNDARY, case_ref)
    return True


def drain_refresh() -> int:
    """Beat: a DRAINING clinic with no RUNNING job becomes DRAINED. Returns how many moved."""
    running = ReevaluationJob.objects.filter(state=JobState.RUNNING)
    moved = 0
    for row in ClinicReevaluationSettings.objects.filter(drain_state=DrainState.DRAINING):
        with transaction.atomic():
            locked = ClinicReevaluationSettings.objects.select_for_update(no_key=True).get(pk=row.pk)
            if locked.drain_state != DrainState.DRAINING:
                continue
            if running.filter(clinic_id=locked.clinic_id).exists():
                continue
            cas_update(locked, drain_state=DrainState.DRAINED)
            moved += 1
    return moved


def due_override_set(
    *,
    clinic,
    held_minutes: int | None,
    proposed_minutes: int | None,
    actor,
    reason: str,
    idempotency_key: str = "",
) -> ClinicReevaluationSettings:
    """Set the clinic's due-time targets. Existing waiting jobs may move later, never earlier."""
    _require_role(actor, clinic, "due_override_set")
    reason = _check_reason(reason)
    for name, value in (("held_minutes", held_minutes), ("proposed_minutes", proposed_minutes)):
        if value is not None and not (1 <= value <= 24 * 60):
            raise ValidationFailed(fields={name: ["Between 1 and 1440 minutes."]})
    with transaction.atomic():
        row = settings_for(clinic, lock=True)
        cas_update(row, held_due_minutes=held_minutes, proposed_due_minutes=proposed_minutes)
        for priority_class in PriorityClass.values:
            minutes = due_minutes(row, priority_class)
            # GREATEST keeps an existing job's due_at from ever moving backwards.
            cas_update_all(
                ReevaluationJob.objects.filter(clinic_id=clinic.pk, priority_class=priority_class),
                expected_status=[JobState.PENDING, JobState.RETRY_WAIT],
                due_at=Greatest(
                    F("due_at"),
                    ExpressionWrapper(
                        F("created_at") + timedelta(minutes=minutes), output_field=DateTimeField()
                    ),
                ),
            )
        _audit(
            actor, "due_override_set", clinic, reason, idempotency_key,
            {"held_minutes": held_minutes, "proposed_minutes": proposed_minutes},
        )
        return row


__all__ = [
    "ROLLOUT_ORDER",
    "drain_moves",
    "drain_refresh",
    "drain_set",
    "due_minutes",
    "privacy_stop",
    "due_override_set",
    "mode_moves",
    "mode_set",
    "rollout_path",
    "settings_for",
]
