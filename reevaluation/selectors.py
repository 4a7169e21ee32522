"""Reevaluation reads for the API and the operations console: refs, states, codes and counts only."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import (
    Avg,
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    Subquery,
    Sum,
    Value,
    When,
)
from django.utils import timezone

from common.errors import NotFound
from common.pagination import day_bounds, keyset_page
from common.timefmt import iso_in_zone
from reevaluation.models import (
    CHANGE_OUTCOMES,
    JOB_COMPLETED_TOPIC,
    TRANSIENT_FAILURE_CODES,
    TRUST_PRIVACY_FAILURE_CODES,
    ClinicReevaluationSettings,
    DrainState,
    FailureClass,
    JobState,
    QuarantineCase,
    RedrivePreview,
    ReevaluationHead,
    ReevaluationJob,
    ReevaluationOutcome,
    drain_moves,
    failure_class,
    mode_moves,
)

#: The action queue shows what STAFF should look at first: failures, then waits, then work in flight.
QUEUE_STATES = (JobState.FAILED, JobState.RETRY_WAIT, JobState.RUNNING, JobState.PENDING)
#: Queue rank beyond the states: a completed job that needs staff comes right after actionable
#: failures; a FAILED job already redriven (its child still open) comes last, marked with its child.
RANK_FAILED, RANK_NEEDS_STAFF, RANK_REDRIVEN = 0, 1, 9


def failure_class_q(cls: str) -> Q:
    """The jobs whose ``last_failure_code`` falls in failure class ``cls`` (unknown codes: CONTRACT)."""
    if cls == FailureClass.TRANSIENT:
        return Q(last_failure_code__in=TRANSIENT_FAILURE_CODES)
    if cls == FailureClass.TRUST_PRIVACY:
        return Q(last_failure_code__in=TRUST_PRIVACY_FAILURE_CODES)
    return ~Q(last_failure_code__in=TRANSIENT_FAILURE_CODES | TRUST_PRIVACY_FAILURE_CODES)


def class_counts(queryset) -> dict[str, int]:
    """Counts per failure class over ``queryset`` (FAILED jobs), in one query."""
    return queryset.aggregate(**{cls: Count("id", filter=failure_class_q(cls)) for cls in FailureClass.values})


def _children():
    return ReevaluationJob.objects.filter(clinic_id=OuterRef("clinic_id"), redrive_of=OuterRef("pk"))


def redrivable(clinic):
    """FAILED jobs still actionable: the scope's head revision and not redriven yet."""
    heads = ReevaluationHead.objects.filter(
        clinic_id=OuterRef("clinic_id"),
        tenant_group_id=OuterRef("tenant_group_id"),
        fingerprint=OuterRef("fingerprint"),
        revision=OuterRef("revision"),
    )
    return (
        ReevaluationJob.objects.filter(clinic_id=clinic.pk, state=JobState.FAILED)
        .filter(Exists(heads))
        .exclude(Exists(_children()))
    )


def drained_clinics() -> list[dict]:
    """Every clinic that is not ACTIVE, with why: for a metrics gauge and alerting (one query).

    ``[{clinic, tenant_group, drain_state, drain_cause, since}]``; ``drain_cause`` is ADMIN or
    QUARANTINE_REPEATED (an automatic stop that waits for an ADMIN).
    """
    rows = (
        ClinicReevaluationSettings.objects.exclude(drain_state=DrainState.ACTIVE)
        .order_by("clinic_id")
        .values("clinic__ref", "tenant_group__ref", "drain_state", "drain_cause", "drain_changed_at")
    )
    return [
        {
            "clinic": row["clinic__ref"],
            "tenant_group": row["tenant_group__ref"],
            "drain_state": row["drain_state"],
            "drain_cause": row["drain_cause"] or "ADMIN",
            "since": row["drain_changed_at"].isoformat() if row["drain_changed_at"] else None,  # many zones: UTC
        }
        for row in rows
    ]


def _iso(value: datetime | None, clinic) -> str | None:
    """A clinic's time in its own zone: the one rule of the ops reads and the console (as the waitlist's)."""
    return iso_in_zone(value, clinic.timezone)


def _age(now: datetime, value: datetime | None) -> int | None:
    return int((now - value).total_seconds()) if value is not None else None


def _settings_values(clinic) -> dict:
    row: Any = ClinicReevaluationSettings.objects.filter(clinic_id=clinic.pk).values().first()
    return row or {
        "mutation_mode": settings.REEVALUATION_DEFAULT_MODE,
        "drain_state": DrainState.ACTIVE,
        "consecutive_assessment_failures": 0,
        "lease_renewal_failures": 0,
        "held_due_minutes": None,
        "proposed_due_minutes": None,
        "drain_cause": "",
        "drain_detail": {},
        "drain_changed_at": None,
        "policy_ref": "",
        "policy_generation": None,
    }


def snapshot(*, clinic, now: datetime | None = None, queue_limit: int = 20) -> dict:
    """The operational snapshot of one clinic (API.md "Operations"), in a fixed number of queries."""
    now = now or timezone.now()
    jobs = ReevaluationJob.objects.filter(clinic_id=clinic.pk)
    counts = {state: 0 for state in JobState.values}
    for row in jobs.values("state").annotate(n=Count("id")).order_by():
        counts[row["state"]] = row["n"]
    agg = jobs.aggregate(
        active_leases=Count("id", filter=Q(state=JobState.RUNNING, lease_expires_at__gt=now)),
        expired_leases=Count("id", filter=Q(state=JobState.RUNNING, lease_expires_at__lte=now)),
        oldest_backlog=Min("created_at", filter=Q(state__in=[JobState.PENDING, JobState.RETRY_WAIT])),
        oldest_pending=Min("created_at", filter=Q(state=JobState.PENDING)),
        overdue=Count("id", filter=Q(state__in=[JobState.PENDING, JobState.RETRY_WAIT], due_at__lt=now)),
        renewal_failures_active=Sum("renewal_failures", filter=Q(state=JobState.RUNNING)),
        needs_staff=Count("id", filter=Q(needs_staff=True)),
    )
    claimed = jobs.filter(first_claimed_at__isnull=False, first_claimed_at__gte=now - timedelta(hours=1))
    latency = claimed.aggregate(
        avg=Avg(F("first_claimed_at") - F("created_at")), worst=Max(F("first_claimed_at") - F("created_at"))
    )
    row = _settings_values(clinic)
    open_quarantine = QuarantineCase.objects.filter(clinic_id=clinic.pk).count()
    actionable = class_counts(redrivable(clinic))
    failed_actionable = sum(actionable.values())
    return {
        "clinic": clinic.ref,
        "counts": counts,
        # FAILED jobs an operator still has to act on (head revision, not redriven), per failure
        # class; the rest of ``counts.FAILED`` were redriven or superseded by a newer revision.
        "failed_actionable": failed_actionable,
        "failed_by_class": actionable,
        "failed_settled": counts[JobState.FAILED] - failed_actionable,
        "needs_staff_count": agg["needs_staff"],
        "active_leases": agg["active_leases"],
        "expired_leases": agg["expired_leases"],
        "oldest_backlog_age_seconds": _age(now, agg["oldest_backlog"]),
        "oldest_pending_age_seconds": _age(now, agg["oldest_pending"]),
        "overdue_count": agg["overdue"],
        "claim_latency_seconds": {
            "avg_last_hour": round(latency["avg"].total_seconds(), 3) if latency["avg"] is not None else None,
            "max_last_hour": round(latency["worst"].total_seconds(), 3)
            if latency["worst"] is not None
            else None,
        },
        "lease_renewal_failures": row["lease_renewal_failures"],
        "consecutive_assessment_failures": row["consecutive_assessment_failures"],
        "quarantine_count": open_quarantine,
        "drain_state": row["drain_state"],
        "drain_cause": row["drain_cause"] or None,
        "drain_detail": row["drain_detail"] or {},
        "drain_changed_at": _iso(row["drain_changed_at"], clinic),
        "mutation_mode": row["mutation_mode"],
        "policy": {"ref": row["policy_ref"] or None, "generation": row["policy_generation"]},
        "due_overrides": {
            "held_minutes": row["held_due_minutes"],
            "proposed_minutes": row["proposed_due_minutes"],
        },
        "action_queue": action_queue(clinic=clinic, limit=queue_limit),
        "recent_quarantine": quarantine_list(clinic=clinic, limit=10),
    }


def _redriven_ids(clinic, states=None):
    """Ids of the clinic's jobs that have a redrive child (in one of ``states``): uncorrelated, so
    PostgreSQL hashes it once per query instead of probing the index for every job of the clinic."""
    children = ReevaluationJob.objects.filter(clinic_id=clinic.pk, redrive_of__isnull=False)
    if states is not None:
        children = children.filter(state__in=states)
    return children.values("redrive_of_id")


def _queue_rank(clinic):
    return Case(
        When(Q(state=JobState.FAILED) & Q(pk__in=_redriven_ids(clinic)), then=Value(RANK_REDRIVEN)),
        When(state=JobState.COMPLETED, needs_staff=True, then=Value(RANK_NEEDS_STAFF)),
        *[When(state=state, then=Value(i + 1 if i else RANK_FAILED)) for i, state in enumerate(QUEUE_STATES)],
        output_field=IntegerField(),
    )


def action_queue(*, clinic, limit: int = 20, after: str | None = None) -> list[dict]:
    """Jobs needing attention: HELD_PRESENT before PROPOSED_ONLY, then rank, due_at, ref (keyset).

    Rank: actionable FAILED, COMPLETED needing staff (a PROPOSED without a feasible replacement),
    RETRY_WAIT, RUNNING, PENDING, then FAILED jobs already redriven whose child is still open or
    failed again (marked ``redriven_as``). A redriven job whose child completed leaves the queue.
    """
    limit = max(1, min(int(limit), 200))
    settled = _redriven_ids(clinic, [JobState.COMPLETED, JobState.STALE])
    # Only the rank is computed for every queued job (the sort needs it); the child's and the parent's
    # refs are scalar subqueries that PostgreSQL evaluates after the LIMIT, for the rows shown. (A
    # correlated subquery per job, or a join for the parent, costs the planner enough on a 10k-job
    # clinic to cross ``jit_above_cost``: JIT compilation alone was over half the page's time.)
    queryset = (
        ReevaluationJob.objects.filter(clinic_id=clinic.pk)
        .filter(Q(state__in=QUEUE_STATES) | Q(needs_staff=True))
        .exclude(Q(state=JobState.FAILED) & Q(pk__in=settled))
        .annotate(rank=_queue_rank(clinic))
        .order_by("priority", "rank", "due_at", "ref")
    )
    if after:
        anchor = queryset.filter(ref=after).values("rank", "priority", "due_at", "ref").first()
        if anchor is None:
            raise NotFound()
        r, p, d, ref = anchor["rank"], anchor["priority"], anchor["due_at"], anchor["ref"]
        queryset = queryset.filter(
            Q(priority__gt=p)
            | Q(priority=p, rank__gt=r)
            | Q(priority=p, rank=r, due_at__gt=d)
            | Q(priority=p, rank=r, due_at=d, ref__gt=ref)
        )
    return [
        {
            "job": job.ref,
            "state": job.state,
            "target_revision": job.revision,
            "priority_class": job.priority_class,
            "due_at": _iso(job.due_at, clinic),
            "next_attempt_at": _iso(job.next_attempt_at, clinic),
            "last_failure_code": job.last_failure_code or None,
            "attempts": job.attempts,
            "max_attempts": job.max_attempts,
            "outcome_counts": job.outcome_counts,
            "target_policy_ref": job.target_policy_ref or None,
            "target_policy_generation": job.target_policy_generation,
            "redrive_of": job.redrive_of_ref,
            "redriven_as": job.redriven_as,
            "needs_staff": job.needs_staff,
            "failure_class": failure_class(job.last_failure_code) if job.state == JobState.FAILED else None,
        }
        for job in queryset.annotate(
            redriven_as=Subquery(_children().values("ref")[:1]),
            redrive_of_ref=Subquery(ReevaluationJob.objects.filter(pk=OuterRef("redrive_of_id")).values("ref")[:1]),
        )[:limit]
    ]


def recent_changes(*, clinic, limit: int = 10) -> list[dict]:
    """Applied outcomes that changed what a patient was offered (newest first), for staff.

    Each row: job, appointment ref, outcome, replacement ref, and the delivery state of the job's
    ``reevaluation.job_completed`` message (which carries the patient's notice): refs and states only.
    """
    from common.models import OutboxMessage

    notice = OutboxMessage.objects.filter(
        topic=JOB_COMPLETED_TOPIC, clinic_ref=clinic.ref, aggregate_ref=OuterRef("job__ref")
    )
    rows = (
        ReevaluationOutcome.objects.filter(clinic_id=clinic.pk, applied=True, outcome__in=CHANGE_OUTCOMES)
        .order_by("-created_at", "-id")
        .annotate(
            notice_status=Subquery(notice.values("status")[:1]),
            notice_code=Subquery(notice.values("last_error_code")[:1]),
        )
        .values(
            "job__ref", "appointment_ref", "outcome", "replacement_ref", "created_at", "notice_status", "notice_code"
        )[: max(1, min(int(limit), 50))]
    )
    return [
        {
            "job": row["job__ref"],
            "appointment": row["appointment_ref"],
            "outcome": row["outcome"],
            "replacement": row["replacement_ref"] or None,
            "created_at": _iso(row["created_at"], clinic),
            "notice": row["notice_status"],
            "notice_code": row["notice_code"] or None,
        }
        for row in rows
    ]


def quarantine_list(*, clinic, limit: int = 50, after: str | None = None) -> list[dict]:
    """Quarantine cases attributed to the clinic, newest first (keyset after a case ref)."""
    limit = max(1, min(int(limit), 200))
    queryset = QuarantineCase.objects.filter(clinic_id=clinic.pk).order_by("-created_at", "-id")
    if after:
        anchor = queryset.filter(ref=after).values("created_at", "id").first()
        if anchor is None:
            raise NotFound()
        queryset = queryset.filter(
            Q(created_at__lt=anchor["created_at"]) | Q(created_at=anchor["created_at"], id__lt=anchor["id"])
        )
    return [
        {
            "case": case.ref,
            "reason_code": case.reason_code,
            "category": case.category,
            "source": case.source,
            "evidence_digest": case.evidence_digest,
            "job": case.job.ref if case.job else None,
            "correlation_id": case.correlation_id,
            "created_at": _iso(case.created_at, clinic),
        }
        for case in queryset.select_related("job")[:limit]
    ]


def job_panel(*, clinic, job_ref: str) -> dict:
    """What the console's detail panel shows for one job of ``clinic``, in three queries.

    Scope (tenant group, clinic, the fingerprint's first 8 hex characters only), revision, target
    policy, state, timings, attempts, the latest outcome and the redrive lineage (parent, root and
    children). No patient data: the fingerprint is pseudonymous and is shortened anyway.
    A missing job and another clinic's job are the same ``NotFound``.
    """
    job = (
        ReevaluationJob.objects.filter(clinic_id=clinic.pk, ref=job_ref)
        .select_related("tenant_group", "redrive_of", "lineage_root")
        .first()
    )
    if job is None:
        raise NotFound()
    latest = (
        job.outcomes.order_by("-created_at", "-pk")
        .values("appointment_ref", "status_before", "outcome", "applied", "mode", "replacement_ref")
        .first()
    )
    children = list(
        ReevaluationJob.objects.filter(clinic_id=clinic.pk, redrive_of_id=job.pk)
        .order_by("created_at", "pk")
        .values("ref", "state")
    )
    return {
        "job": job.ref,
        "tenant_group": job.tenant_group.ref,
        "clinic": clinic.ref,
        "fingerprint_prefix": job.fingerprint[:8],
        "state": job.state,
        "target_revision": job.revision,
        "priority_class": job.priority_class,
        "due_at": _iso(job.due_at, clinic),
        "next_attempt_at": _iso(job.next_attempt_at, clinic),
        "created_at": _iso(job.created_at, clinic),
        "finished_at": _iso(job.finished_at, clinic),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "last_failure_code": job.last_failure_code or None,
        "target_policy_ref": job.target_policy_ref or None,
        "target_policy_generation": job.target_policy_generation,
        "outcome_counts": job.outcome_counts,
        "latest_outcome": latest,
        "redrive_of": job.redrive_of.ref if job.redrive_of else None,
        "lineage_root": job.lineage_root.ref if job.lineage_root else None,
        "redrives": children,
    }


def clinic_switches(*, clinic, snapshot: dict | None = None) -> dict:
    """The clinic's mode and drain state with the moves ``mode_set``/``drain_set`` accept now (two
    queries, none when the clinic's fresh ``snapshot`` is given).

    The console's forms offer exactly these moves, so the console and the services agree.
    """
    if snapshot is not None:
        row, leases = snapshot, snapshot["counts"][JobState.RUNNING] > 0
    else:
        row = _settings_values(clinic)
        leases = ReevaluationJob.objects.filter(clinic_id=clinic.pk, state=JobState.RUNNING).exists()
    return {
        "mutation_mode": row["mutation_mode"],
        "drain_state": row["drain_state"],
        "drain_cause": row["drain_cause"] or None,
        "mode_moves": mode_moves(row["mutation_mode"]),
        "drain_moves": drain_moves(row["drain_state"], leases_active=leases),
    }


def preview_targets(*, clinic, preview_ref: str) -> dict | None:
    """A redrive preview's frozen targets (ref and failure class) and whether it includes
    CONTRACT/TRUST_PRIVACY failures; None when the clinic has no such preview."""
    preview = (
        RedrivePreview.objects.filter(clinic_id=clinic.pk, ref=preview_ref)
        .values("job_ids", "failure_classes")
        .first()
    )
    if preview is None:
        return None
    jobs = (
        ReevaluationJob.objects.filter(pk__in=preview["job_ids"])
        .order_by("pk")
        .values_list("ref", "last_failure_code")
    )
    return {
        "targets": [{"job": ref, "failure_class": failure_class(code)} for ref, code in jobs],
        "non_transient": bool(set(preview["failure_classes"]) - {FailureClass.TRANSIENT}),
    }
#: Jobs that will not run again (a redrive makes a new job in the lineage).
FINISHED_STATES = (JobState.COMPLETED, JobState.FAILED, JobState.STALE)


def finished_jobs_page(
    *, clinic, limit: int = 20, after: str = "", state: str | None = None, outcome: str | None = None,
    failure_code: str | None = None, day=None,
):
    """Finished jobs, newest first (keyset on ``finished_at``, ``id``), one query.

    ``outcome`` keeps jobs with at least one appointment of that outcome; ``failure_code`` matches the
    last failure code exactly; ``day`` is a local day of ``finished_at`` in the clinic's zone.
    """
    jobs = ReevaluationJob.objects.filter(
        clinic_id=clinic.pk, state__in=FINISHED_STATES, finished_at__isnull=False
    ).select_related("redrive_of")
    if state:
        jobs = jobs.filter(state=state)
    if outcome:
        jobs = jobs.filter(**{f"outcome_counts__{outcome}__gt": 0})
    if failure_code:
        jobs = jobs.filter(last_failure_code=failure_code)
    if day:
        start, end = day_bounds(day, clinic.timezone)
        jobs = jobs.filter(finished_at__gte=start, finished_at__lt=end)
    return keyset_page(jobs, field="finished_at", limit=limit, after=after, descending=True)
