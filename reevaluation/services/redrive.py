"""ADMIN redrive: PREVIEW freezes the exact job set it shows; EXECUTE acts on that set only.

Eligible: a FAILED job of the clinic whose revision is still its scope's head and that has not
been redriven yet. EXECUTE re-checks each previewed row under lock (in id order) and reports the
ones whose state changed in between as skipped. A redrive adds a PENDING child job to the lineage;
the FAILED row stays as evidence. The actor is always the authenticated user.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings as dj_settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from common.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from common.services import audit_record, new_correlation_id
from scheduling.scoping import clinics_for_user, user_is_admin

from ..models import JobState, RedrivePreview, ReevaluationHead, ReevaluationJob
from .modes import due_minutes, settings_for

MAX_LIMIT = 100


@dataclass(frozen=True)
class PreviewResult:
    preview_ref: str
    targets: list[dict]

    @property
    def count(self) -> int:
        return len(self.targets)


@dataclass(frozen=True)
class ExecuteResult:
    redriven: list[dict]
    skipped: list[dict]

    @property
    def count(self) -> int:
        return len(self.redriven)


def require_admin(actor, clinic) -> None:
    """Services check the role themselves too, so a console view cannot forget it."""
    if not clinics_for_user(actor).filter(pk=clinic.pk).exists():
        raise NotFound()
    if not user_is_admin(actor, clinic):
        raise PermissionDenied("This action needs the ADMIN role in this clinic.")


def _eligible(clinic):
    heads = ReevaluationHead.objects.filter(
        clinic_id=OuterRef("clinic_id"),
        tenant_group_id=OuterRef("tenant_group_id"),
        fingerprint=OuterRef("fingerprint"),
        revision=OuterRef("revision"),
    )
    children = ReevaluationJob.objects.filter(clinic_id=OuterRef("clinic_id"), redrive_of=OuterRef("pk"))
    return (
        ReevaluationJob.objects.filter(clinic_id=clinic.pk, state=JobState.FAILED)
        .filter(Exists(heads))
        .exclude(Exists(children))
    )


def _target(job: ReevaluationJob) -> dict:
    return {
        "job": job.ref,
        "state": job.state,
        "target_revision": job.revision,
        "priority_class": job.priority_class,
        "last_failure_code": job.last_failure_code,
        "attempts": job.attempts,
    }


def _check(reason: str, limit: int) -> str:
    reason = (reason or "").strip()
    fields = {}
    if not reason:
        fields["reason"] = ["A reason is required."]
    if not isinstance(limit, int) or not (1 <= limit <= MAX_LIMIT):
        fields["limit"] = [f"Between 1 and {MAX_LIMIT}."]
    if fields:
        raise ValidationFailed(fields=fields)
    return reason


def redrive_preview(
    *, clinic, actor, reason: str, limit: int, target_revision: int | None = None, idempotency_key: str = ""
) -> PreviewResult:
    """Freeze and return the jobs an EXECUTE of this preview would redrive (STAFF or ADMIN of ``clinic``)."""
    if not clinics_for_user(actor).filter(pk=clinic.pk).exists():
        raise NotFound()
    reason = _check(reason, limit)
    with transaction.atomic():
        queryset = _eligible(clinic)
        if target_revision is not None:
            queryset = queryset.filter(revision=target_revision)
        jobs = list(queryset.order_by("pk")[:limit])
        preview = RedrivePreview.objects.create(
            tenant_group_id=clinic.tenant_group_id,
            clinic=clinic,
            actor=actor,
            reason=reason,
            target_revision=target_revision,
            limit=limit,
            job_ids=[job.pk for job in jobs],
            expires_at=timezone.now() + timedelta(minutes=dj_settings.REEVALUATION_REDRIVE_PREVIEW_MINUTES),
        )
        targets = [_target(job) for job in jobs]
        audit_record(
            actor=actor,
            action="reevaluation.redrive_preview",
            clinic=clinic,
            target_ref=preview.ref,
            reason=reason,
            idempotency_key=idempotency_key,
            correlation_id=new_correlation_id(),
            result={
                "count": len(targets),
                "jobs": [t["job"] for t in targets],
                "target_revision": target_revision,
            },
        )
    return PreviewResult(preview_ref=preview.ref, targets=targets)


def redrive_execute(
    *, clinic, actor, preview_ref: str, reason: str, idempotency_key: str = ""
) -> ExecuteResult:
    """Redrive the previewed jobs that are still eligible; report the others as skipped (ADMIN only)."""
    require_admin(actor, clinic)
    reason = _check(reason, 1)
    now = timezone.now()
    with transaction.atomic():
        preview = RedrivePreview.objects.select_for_update().filter(clinic=clinic, ref=preview_ref).first()
        if preview is None:
            raise NotFound()
        if preview.executed_at is not None:
            raise Conflict("This preview was executed already.", code="PREVIEW_USED")
        if preview.expires_at <= now:
            raise Conflict("This preview has expired; preview again.", code="PREVIEW_EXPIRED")
        # Lock the previewed rows in id order (the fixed order everywhere), then re-check them:
        # only rows still eligible after the locks are held are redriven.
        locked = list(
            ReevaluationJob.objects.select_for_update().filter(pk__in=preview.job_ids).order_by("pk")
        )
        eligible_ids = set(_eligible(clinic).filter(pk__in=preview.job_ids).values_list("pk", flat=True))
        row = settings_for(clinic)
        redriven: list[dict] = []
        skipped: list[dict] = []
        for job in locked:
            if job.pk not in eligible_ids or job.state != JobState.FAILED:
                skipped.append({"job": job.ref, "state": job.state})
                continue
            child = ReevaluationJob.objects.create(
                tenant_group_id=job.tenant_group_id,
                clinic_id=job.clinic_id,
                fingerprint=job.fingerprint,
                revision=job.revision,
                event_id=job.event_id,
                assessment_ref=job.assessment_ref,
                assessment_hash=job.assessment_hash,
                material_change=job.material_change,
                state=JobState.PENDING,
                priority_class=job.priority_class,
                priority=job.priority,
                due_at=now + timedelta(minutes=due_minutes(row, job.priority_class)),
                max_attempts=job.max_attempts,
                cooldown_seconds=job.cooldown_seconds,
                redrive_of=job,
                lineage_root_id=job.lineage_root_id or job.pk,
                redrive_reason=reason[:200],
                held_targets=job.held_targets,
                proposed_targets=job.proposed_targets,
                created_at=now,
            )
            redriven.append({"job": job.ref, "redrive_job": child.ref, "target_revision": job.revision})
        result = {
            "redriven": redriven,
            "skipped": skipped,
            "count": len(redriven),
            "skipped_count": len(skipped),
        }
        RedrivePreview.objects.filter(pk=preview.pk).update(executed_at=now, result=result)
        audit_record(
            actor=actor,
            action="reevaluation.redrive_execute",
            clinic=clinic,
            target_ref=preview.ref,
            reason=reason,
            idempotency_key=idempotency_key,
            correlation_id=new_correlation_id(),
            result=result,
        )
    return ExecuteResult(redriven=redriven, skipped=skipped)
