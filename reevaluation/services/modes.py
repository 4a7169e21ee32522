"""Per-clinic mutation mode, drain state and due-time overrides: ADMIN commands with an audit row."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings as dj_settings
from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F
from django.db.models.functions import Greatest

from common.errors import Conflict, ValidationFailed, VersionConflict
from common.services import audit_record

from ..models import (
    ClinicReevaluationSettings,
    DrainState,
    JobState,
    MutationMode,
    PriorityClass,
    ReevaluationJob,
)

DRAIN_TRANSITIONS: dict[str, set[str]] = {
    DrainState.ACTIVE: {DrainState.DRAINING},
    DrainState.DRAINING: {DrainState.DRAINED, DrainState.ACTIVE},
    DrainState.DRAINED: {DrainState.ACTIVE},
}


def settings_for(clinic, *, lock: bool = False) -> ClinicReevaluationSettings:
    """The clinic's settings row, created on first use with the configured default mode."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO reevaluation_clinicreevaluationsettings (tenant_group_id, clinic_id, mutation_mode,"
            " drain_state, consecutive_assessment_failures, lease_renewal_failures, version, updated_at)"
            " VALUES (%s, %s, %s, %s, 0, 0, 1, now()) ON CONFLICT (clinic_id) DO NOTHING",
            [
                clinic.tenant_group_id,
                clinic.pk,
                getattr(dj_settings, "REEVALUATION_DEFAULT_MODE", MutationMode.DISABLED),
                DrainState.ACTIVE,
            ],
        )
    queryset = ClinicReevaluationSettings.objects.all()
    if lock:
        queryset = queryset.select_for_update()
    return queryset.get(clinic_id=clinic.pk)


def due_minutes(row: ClinicReevaluationSettings, priority_class: str) -> int:
    if priority_class == PriorityClass.HELD_PRESENT:
        return row.held_due_minutes or dj_settings.REEVALUATION_HELD_DUE_MINUTES
    return row.proposed_due_minutes or dj_settings.REEVALUATION_PROPOSED_DUE_MINUTES


def _require_admin(actor, clinic) -> None:
    """``actor`` None is a system job (management command); a user must be the clinic's ADMIN."""
    if actor is not None:
        from .redrive import require_admin

        require_admin(actor, clinic)


def _check_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed(fields={"reason": ["A reason is required."]})
    return reason


def mode_set(
    *, clinic, mode: str, actor, reason: str, idempotency_key: str = ""
) -> ClinicReevaluationSettings:
    """Change the clinic's mutation mode (any mode may follow any other: rollback is a mode change)."""
    _require_admin(actor, clinic)
    reason = _check_reason(reason)
    if mode not in MutationMode.values:
        raise ValidationFailed(fields={"mode": [f"One of {', '.join(MutationMode.values)}."]})
    with transaction.atomic():
        row = settings_for(clinic, lock=True)
        previous = row.mutation_mode
        if previous != mode:
            cas_update_settings(row, mutation_mode=mode)
        audit_record(
            actor=actor,
            action="reevaluation.mode_set",
            clinic=clinic,
            reason=reason,
            idempotency_key=idempotency_key,
            result={"from": previous, "to": mode},
            system_label="reevaluation",
        )
        return row


def drain_set(
    *, clinic, state: str, actor, reason: str, idempotency_key: str = ""
) -> ClinicReevaluationSettings:
    """ACTIVE → DRAINING (no new claims) → DRAINED (no active leases); either back to ACTIVE.

    Asking for DRAINING when no lease is active goes straight to DRAINED; asking for DRAINED while
    leases are active is a DRAIN_LEASES_ACTIVE conflict (the beat finishes the drain instead).
    """
    _require_admin(actor, clinic)
    reason = _check_reason(reason)
    if state not in DrainState.values:
        raise ValidationFailed(fields={"state": [f"One of {', '.join(DrainState.values)}."]})
    with transaction.atomic():
        row = settings_for(clinic, lock=True)
        previous = row.drain_state
        if previous != state:
            if state not in DRAIN_TRANSITIONS[previous]:
                raise Conflict(f"Cannot move from {previous} to {state}.", code="DRAIN_TRANSITION_INVALID")
            running = ReevaluationJob.objects.filter(clinic_id=clinic.pk, state=JobState.RUNNING).exists()
            if state == DrainState.DRAINED and running:
                raise Conflict("Leases are still active.", code="DRAIN_LEASES_ACTIVE")
            target = DrainState.DRAINED if state == DrainState.DRAINING and not running else state
            cas_update_settings(row, drain_state=target)
        audit_record(
            actor=actor,
            action="reevaluation.drain_set",
            clinic=clinic,
            reason=reason,
            idempotency_key=idempotency_key,
            result={"from": previous, "to": row.drain_state},
            system_label="reevaluation",
        )
        return row


def drain_refresh() -> int:
    """Beat: a DRAINING clinic with no RUNNING job becomes DRAINED. Returns how many moved."""
    running = ReevaluationJob.objects.filter(state=JobState.RUNNING)
    moved = 0
    for row in ClinicReevaluationSettings.objects.filter(drain_state=DrainState.DRAINING):
        with transaction.atomic():
            locked = ClinicReevaluationSettings.objects.select_for_update().get(pk=row.pk)
            if locked.drain_state != DrainState.DRAINING:
                continue
            if running.filter(clinic_id=locked.clinic_id).exists():
                continue
            cas_update_settings(locked, drain_state=DrainState.DRAINED)
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
    _require_admin(actor, clinic)
    reason = _check_reason(reason)
    for name, value in (("held_minutes", held_minutes), ("proposed_minutes", proposed_minutes)):
        if value is not None and not (1 <= value <= 24 * 60):
            raise ValidationFailed(fields={name: ["Between 1 and 1440 minutes."]})
    with transaction.atomic():
        row = settings_for(clinic, lock=True)
        cas_update_settings(row, held_due_minutes=held_minutes, proposed_due_minutes=proposed_minutes)
        waiting = ReevaluationJob.objects.filter(
            clinic_id=clinic.pk, state__in=[JobState.PENDING, JobState.RETRY_WAIT]
        )
        for priority_class in PriorityClass.values:
            minutes = due_minutes(row, priority_class)
            # GREATEST keeps an existing job's due_at from ever moving backwards.
            waiting.filter(priority_class=priority_class).update(
                due_at=Greatest(
                    F("due_at"),
                    ExpressionWrapper(
                        F("created_at") + timedelta(minutes=minutes), output_field=DateTimeField()
                    ),
                ),
                version=F("version") + 1,
            )
        audit_record(
            actor=actor,
            action="reevaluation.due_override_set",
            clinic=clinic,
            reason=reason,
            idempotency_key=idempotency_key,
            result={"held_minutes": held_minutes, "proposed_minutes": proposed_minutes},
            system_label="reevaluation",
        )
        return row


def cas_update_settings(row: ClinicReevaluationSettings, **changes) -> None:
    """Settings rows have no status column; the version alone is the CAS guard."""
    updated = ClinicReevaluationSettings.objects.filter(pk=row.pk, version=row.version).update(
        version=F("version") + 1, **changes
    )
    if updated != 1:
        raise VersionConflict("The clinic's reevaluation settings changed.")
    for key, value in changes.items():
        setattr(row, key, value)
    row.version += 1


__all__ = [
    "drain_refresh",
    "drain_set",
    "due_minutes",
    "due_override_set",
    "mode_set",
    "settings_for",
]
