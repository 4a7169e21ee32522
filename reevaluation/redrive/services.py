"""ADMIN redrive by failure class: PREVIEW freezes the exact job set it shows; EXECUTE acts on that set only.

Eligible: a FAILED job of the clinic whose revision is still its scope's head and that has not
been redriven yet. PREVIEW selects by failure class (``models.FailureClass``): TRANSIENT by default;
CONTRACT and TRUST_PRIVACY only with ``include_non_transient`` (and EXECUTE of such a preview needs
``confirm_non_transient``). EXECUTE may leave out single previewed jobs, re-checks each remaining row
under lock (in id order) and reports the ones whose state changed in between as skipped. A redrive
adds a PENDING child job to the lineage; the FAILED row stays as evidence, marked redriven. The
actor is always the authenticated user.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.conf import settings as dj_settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from common.errors import Conflict, NotFound, ValidationFailed
from common.services import audit_record, new_correlation_id
from reevaluation.models import FailureClass, JobState, RedrivePreview, ReevaluationJob, failure_class
from reevaluation.modes.services import due_minutes, settings_for
from reevaluation.selectors import class_counts, failure_class_q, redrivable
from scheduling.scoping import require_command_role

MAX_LIMIT = 100


DEFAULT_CLASSES = (FailureClass.TRANSIENT,)
NON_TRANSIENT: frozenset[str] = frozenset({FailureClass.CONTRACT, FailureClass.TRUST_PRIVACY})


@dataclass(frozen=True)
class PreviewResult:
    preview_ref: str
    targets: list[dict]
    failure_classes: list[str] = field(default_factory=lambda: list(DEFAULT_CLASSES))
    class_counts: dict = field(default_factory=dict)
    expires_at: datetime | None = None
    lifetime_seconds: int = 0

    @property
    def count(self) -> int:
        return len(self.targets)

    @property
    def includes_non_transient(self) -> bool:
        return bool(NON_TRANSIENT & set(self.failure_classes))

    def as_body(self) -> dict:
        """The API/console answer: the exact targets, the counts per class and the preview's lifetime."""
        return {
            "preview": self.preview_ref,
            "targets": self.targets,
            "count": self.count,
            "failure_classes": self.failure_classes,
            "class_counts": self.class_counts,
            "includes_non_transient": self.includes_non_transient,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "lifetime_seconds": self.lifetime_seconds,
        }


@dataclass(frozen=True)
class ExecuteResult:
    redriven: list[dict]
    skipped: list[dict]
    excluded: list[dict] = field(default_factory=list)

    def as_body(self) -> dict:
        return {**asdict(self), "count": self.count, "skipped_count": len(self.skipped)}

    @property
    def count(self) -> int:
        return len(self.redriven)


def _target(job: ReevaluationJob) -> dict:
    return {
        "job": job.ref,
        "state": job.state,
        "failure_class": failure_class(job.last_failure_code),
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


def check_classes(failure_classes: Iterable[str] | None, include_non_transient: bool) -> list[str]:
    chosen = list(dict.fromkeys(failure_classes or DEFAULT_CLASSES))
    unknown = [c for c in chosen if c not in FailureClass.values]
    if unknown:
        raise ValidationFailed(fields={"failure_classes": [f"One or more of {', '.join(FailureClass.values)}."]})
    if NON_TRANSIENT & set(chosen) and not include_non_transient:
        raise ValidationFailed(
            "CONTRACT and TRUST_PRIVACY failures are never redriven by default.",
            fields={
                "include_non_transient": [
                    "CONTRACT and TRUST_PRIVACY failures are never redriven by default: investigate first, "
                    "then confirm explicitly to include them."
                ]
            },
        )
    return [c for c in FailureClass.values if c in chosen]


def redrive_preview(
    *,
    clinic,
    actor,
    reason: str,
    limit: int,
    target_revision: int | None = None,
    failure_classes: Iterable[str] | None = None,
    include_non_transient: bool = False,
    idempotency_key: str = "",
) -> PreviewResult:
    """Freeze and return the jobs an EXECUTE of this preview would redrive (STAFF or ADMIN of ``clinic``).

    ``failure_classes`` defaults to TRANSIENT; CONTRACT or TRUST_PRIVACY need ``include_non_transient``.
    """
    require_command_role(actor, clinic, "redrive_preview")
    reason = _check(reason, limit)
    classes = check_classes(failure_classes, include_non_transient)
    lifetime = timedelta(minutes=dj_settings.REEVALUATION_REDRIVE_PREVIEW_MINUTES)
    with transaction.atomic():
        queryset = redrivable(clinic)
        if target_revision is not None:
            queryset = queryset.filter(revision=target_revision)
        counts = class_counts(queryset)
        selected = Q()
        for cls in classes:
            selected |= failure_class_q(cls)
        jobs = list(queryset.filter(selected).order_by("pk")[:limit])
        preview = RedrivePreview.objects.create(
            tenant_group_id=clinic.tenant_group_id,
            clinic=clinic,
            actor=actor,
            reason=reason,
            target_revision=target_revision,
            limit=limit,
            failure_classes=classes,
            job_ids=[job.pk for job in jobs],
            expires_at=timezone.now() + lifetime,
        )
        targets = [_target(job) for job in jobs]
        result = {
            "count": len(targets),
            "jobs": [t["job"] for t in targets],
            "target_revision": target_revision,
            "failure_classes": classes,
            "class_counts": counts,
        }
        _audit(actor, "redrive_preview", clinic, preview, reason, idempotency_key, result)
    return PreviewResult(
        preview_ref=preview.ref,
        targets=targets,
        failure_classes=classes,
        class_counts=counts,
        expires_at=preview.expires_at,
        lifetime_seconds=int(lifetime.total_seconds()),
    )


def redrive_execute(
    *,
    clinic,
    actor,
    preview_ref: str,
    reason: str,
    exclude: Iterable[str] = (),
    confirm_non_transient: bool = False,
    idempotency_key: str = "",
) -> ExecuteResult:
    """Redrive the previewed jobs that are still eligible, less the ``exclude`` refs the ADMIN left
    out; report the others as skipped (ADMIN only). A preview that includes CONTRACT or TRUST_PRIVACY
    failures needs ``confirm_non_transient``."""
    require_command_role(actor, clinic, "redrive_execute")
    exclude = set(exclude or ())
    reason = _check(reason, 1)
    now = timezone.now()
    with transaction.atomic():
        preview = _executable_preview(clinic, preview_ref, now=now, confirm_non_transient=confirm_non_transient)
        previewed = dict(
            ReevaluationJob.objects.filter(pk__in=preview.job_ids).values_list("ref", "pk")
        )
        if exclude - set(previewed):
            raise ValidationFailed(fields={"exclude": ["Only jobs of this preview can be left out."]})
        # Lock the previewed rows in id order (the fixed order everywhere), then re-check them:
        # only rows still eligible after the locks are held are redriven.
        locked = list(
            ReevaluationJob.objects.select_for_update(no_key=True).filter(pk__in=preview.job_ids).order_by("pk")
        )
        eligible_ids = set(redrivable(clinic).filter(pk__in=preview.job_ids).values_list("pk", flat=True))
        row = settings_for(clinic)
        redriven: list[dict] = []
        skipped: list[dict] = []
        excluded: list[dict] = []
        for job in locked:
            if job.ref in exclude:
                excluded.append({"job": job.ref, "state": job.state})
            elif job.pk not in eligible_ids or job.state != JobState.FAILED:
                skipped.append({"job": job.ref, "state": job.state})
            else:
                child = _redrive_job(job, row, reason=reason, now=now)
                redriven.append({"job": job.ref, "redrive_job": child.ref, "target_revision": job.revision})
        result = {
            "redriven": redriven,
            "skipped": skipped,
            "excluded": excluded,
            "count": len(redriven),
            "skipped_count": len(skipped),
        }
        RedrivePreview.objects.filter(pk=preview.pk).update(executed_at=now, result=result)
        _audit(actor, "redrive_execute", clinic, preview, reason, idempotency_key, result)
    return ExecuteResult(redriven=redriven, skipped=skipped, excluded=excluded)


def _executable_preview(clinic, preview_ref: str, *, now, confirm_non_transient: bool) -> RedrivePreview:
    """The preview locked, refused when unknown, used, expired, or holding unconfirmed non-transient failures."""
    preview = RedrivePreview.objects.select_for_update(no_key=True).filter(clinic=clinic, ref=preview_ref).first()
    if preview is None:
        raise NotFound()
    if preview.executed_at is not None:
        raise Conflict("This preview was executed already.", code="PREVIEW_USED")
    if preview.expires_at <= now:
        raise Conflict("This preview has expired; preview again.", code="PREVIEW_EXPIRED")
    if NON_TRANSIENT & set(preview.failure_classes) and not confirm_non_transient:
        raise ValidationFailed(
            "This preview includes CONTRACT or TRUST_PRIVACY failures.",
            fields={"confirm_non_transient": ["Confirm that these failures were investigated."]},
        )
    return preview


def _redrive_job(job: ReevaluationJob, row, *, reason: str, now) -> ReevaluationJob:
    """A new PENDING job for the failed ``job``'s revision, linked to it (``redrive_of``, lineage)."""
    return ReevaluationJob.objects.create(
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


def _audit(actor, action: str, clinic, preview: RedrivePreview, reason: str, idempotency_key: str, result) -> None:
    audit_record(
        actor=actor,
        action=f"reevaluation.{action}",
        clinic=clinic,
        target_ref=preview.ref,
        reason=reason,
        idempotency_key=idempotency_key,
        correlation_id=new_correlation_id(),
        result=result,
    )
