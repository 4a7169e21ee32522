"""A scope's head and its jobs: advancing the head, one job per revision (intake's transaction)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings as dj_settings
from django.utils import timezone

from common.cas import cas_update, cas_update_all
from reevaluation.models import (
    PRIORITY_RANK,
    InboxEvent,
    InboxStatus,
    JobState,
    PriorityClass,
    ReevaluationHead,
    ReevaluationJob,
)
from reevaluation.modes.services import due_minutes, settings_for
from scheduling.models import Appointment, AppointmentStatus


def scope_targets(clinic_id: int, fingerprint: str) -> tuple[list[str], list[str]]:
    """Refs of the fingerprint's HELD and PROPOSED appointments in the clinic (CONFIRMED left out)."""
    rows = (
        Appointment.objects.filter(
            clinic_id=clinic_id,
            patient__crm_fingerprint=fingerprint,
            status__in=[AppointmentStatus.HELD, AppointmentStatus.PROPOSED],
        )
        .order_by("pk")
        .values_list("ref", "status")
    )
    held = [ref for ref, status in rows if status == AppointmentStatus.HELD]
    proposed = [ref for ref, status in rows if status == AppointmentStatus.PROPOSED]
    return held, proposed


def record_revision(
    *, event: InboxEvent, assessment_ref: str, assessment_hash: str
) -> ReevaluationJob | None:
    """Advance the scope head and create the revision's job, in the caller's transaction.

    Returns the new job (PENDING, or STALE when an older revision arrives late), or None when a job
    for this exact revision exists already (the event is then marked DUPLICATE_REVISION).
    The head row is locked first, so two events for one scope serialize here.
    """
    now = timezone.now()
    head = _head_locked(event, assessment_ref, assessment_hash)
    scope = {
        "clinic_id": event.clinic_id,
        "tenant_group_id": event.tenant_group_id,
        "fingerprint": event.fingerprint,
    }
    if ReevaluationJob.objects.filter(
        revision=event.profile_revision, redrive_of__isnull=True, **scope
    ).exists():
        InboxEvent.objects.filter(pk=event.pk).update(status=InboxStatus.DUPLICATE_REVISION)
        return None

    late = event.profile_revision < head.revision
    if event.profile_revision > head.revision:
        # Under the row lock this cannot miss; if it ever did, the VersionConflict refuses the fork.
        cas_update(
            head,
            revision=event.profile_revision,
            assessment_ref=assessment_ref,
            assessment_hash=assessment_hash,
            event_id=event.pk,
            updated_at=now,
        )
    # A newer revision makes every older waiting job STALE (RUNNING ones notice at write-back).
    if not late:
        cas_update_all(
            ReevaluationJob.objects.filter(revision__lt=event.profile_revision, **scope),
            expected_status=[JobState.PENDING, JobState.RETRY_WAIT],
            state=JobState.STALE,
            finished_at=now,
            lease_owner="",
        )
    job = _new_job(event, assessment_ref, assessment_hash, late=late, now=now)
    if late:
        InboxEvent.objects.filter(pk=event.pk).update(status=InboxStatus.LATE)
    return job


def _head_locked(event: InboxEvent, assessment_ref: str, assessment_hash: str) -> ReevaluationHead:
    """The event's scope head, created if missing, locked (two events for one scope serialize here)."""
    # Create the head if missing without racing: ON CONFLICT DO NOTHING leaves the first writer's row.
    ReevaluationHead.objects.bulk_create([ReevaluationHead(
        tenant_group_id=event.tenant_group_id, clinic_id=event.clinic_id, fingerprint=event.fingerprint,
        revision=event.profile_revision, assessment_ref=assessment_ref, assessment_hash=assessment_hash,
        event_id=event.pk,
    )], ignore_conflicts=True)
    return ReevaluationHead.objects.select_for_update(no_key=True).get(
        clinic_id=event.clinic_id, tenant_group_id=event.tenant_group_id, fingerprint=event.fingerprint
    )


def _new_job(event: InboxEvent, assessment_ref: str, assessment_hash: str, *, late: bool,
             now) -> ReevaluationJob:
    """The revision's job: PENDING (STALE when late), its priority class from the scope's HELD/PROPOSED targets."""
    row = settings_for(event.clinic)
    held, proposed = scope_targets(event.clinic_id, event.fingerprint)
    priority_class = PriorityClass.HELD_PRESENT if held else PriorityClass.PROPOSED_ONLY
    return ReevaluationJob.objects.create(
        tenant_group_id=event.tenant_group_id,
        clinic_id=event.clinic_id,
        fingerprint=event.fingerprint,
        revision=event.profile_revision,
        event=event,
        assessment_ref=assessment_ref,
        assessment_hash=assessment_hash,
        material_change=event.material_change,
        state=JobState.STALE if late else JobState.PENDING,
        priority_class=priority_class,
        priority=PRIORITY_RANK[priority_class],
        due_at=now + timedelta(minutes=due_minutes(row, priority_class)),
        max_attempts=dj_settings.REEVALUATION_MAX_ATTEMPTS,
        cooldown_seconds=dj_settings.REEVALUATION_COOLDOWN_SECONDS,
        held_targets=held,
        proposed_targets=proposed,
        created_at=now,
        finished_at=now if late else None,
    )
