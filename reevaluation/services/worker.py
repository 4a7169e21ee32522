"""The worker: take over a claimed lease, fetch the assessment (no transaction open), then record
one outcome per PROPOSED/HELD appointment and complete the job in one fenced transaction.

CONFIRMED appointments are never passed to a scheduling command; as a second line of defence the
write-back digests the scope's CONFIRMED rows before and after and rolls back if they differ.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings as dj_settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from common.errors import Conflict, NotFound, SlotOccupied
from common.services import new_correlation_id, outbox_enqueue
from scheduling.models import Appointment, AppointmentStatus, Practitioner, Resource, Treatment
from scheduling.services import appointment_book, appointment_cancel, appointment_set_status

from ..assessment import Assessment, AssessmentClient, AssessmentError, AssessmentFetcher, Constraints
from ..models import (
    CHANGE_OUTCOMES,
    JOB_COMPLETED_TOPIC,
    QUARANTINE_CATEGORY,
    ClinicReevaluationSettings,
    JobState,
    MutationMode,
    Outcome,
    QuarantineCase,
    ReevaluationHead,
    ReevaluationJob,
    ReevaluationOutcome,
)
from .jobs import Fence, fenced, head_revision, lease_renew, retry_delay
from .modes import quarantine_watch, settings_for

logger = logging.getLogger(__name__)

ELIGIBLE = (AppointmentStatus.PROPOSED, AppointmentStatus.HELD)


class ConfirmedInvariantViolated(RuntimeError):
    """A CONFIRMED appointment changed during a reevaluation write-back (never expected)."""


class PolicyWentBack(Exception):
    """The assessment's policy generation is older than (or conflicts with) the clinic's current one."""


class _Rollback(Exception):
    """Raised inside a savepoint to undo a dry-run trial."""


def lease_start(claim: Fence, *, now: datetime | None = None) -> Fence | None:
    """Swap the dispatcher's owner token for this execution's own one.

    A redelivered or duplicated task message carries the same dispatch token, so only the first
    delivery wins; the others return None and do nothing.
    """
    now = now or timezone.now()
    owner = f"worker:{uuid.uuid4().hex}"
    updated = (
        fenced(claim)
        .filter(lease_expires_at__gt=now)
        .update(
            lease_owner=owner,
            lease_renewed_at=now,
            lease_expires_at=now + timedelta(seconds=dj_settings.REEVALUATION_LEASE_SECONDS),
            version=F("version") + 1,
        )
    )
    return Fence(claim.job_id, owner, claim.attempt) if updated == 1 else None


class LeaseKeeper:
    """Renews a lease from a background thread while the worker waits on the CRM."""

    def __init__(self, fence: Fence, interval: float | None = None):
        self.fence = fence
        self.interval = interval or max(dj_settings.REEVALUATION_LEASE_SECONDS / 3, 1)
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                if not lease_renew(self.fence):
                    self.lost = True
                    return
        finally:
            connection.close()

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def job_run(
    *,
    job_id: int,
    owner: str,
    attempt: int,
    client: AssessmentFetcher | None = None,
    heartbeat: bool = False,
    now: datetime | None = None,
) -> str:
    """Run one claimed job. Returns the job's resulting state, or ``NOOP``/``LEASE_LOST``.

    Safe to call any number of times with the same claim: only the first call takes the lease.
    """
    fence = lease_start(Fence(job_id, owner, attempt), now=now)
    if fence is None:
        return "NOOP"
    job = ReevaluationJob.objects.get(pk=job_id)
    head = head_revision(job)
    if head is not None and job.revision < head:
        return _finish_stale(fence)
    client = client or AssessmentClient()
    try:
        # No transaction is open while we wait on the CRM; the keeper renews the lease meanwhile.
        with LeaseKeeper(fence) if heartbeat else nullcontext():
            assessment = client.fetch(
                assessment_ref=job.assessment_ref, revision=job.revision, expected_hash=job.assessment_hash
            )
    except AssessmentError as exc:
        if exc.transient:
            return job_fail_transient(fence, code=exc.code)
        return job_quarantine(fence, error=exc)
    try:
        return job_complete(fence, assessment=assessment)
    except PolicyWentBack:
        evidence = f"{assessment.policy_ref}:{assessment.policy_generation}".encode()
        return job_quarantine(fence, error=AssessmentError("ASSESSMENT_POLICY_STALE", evidence))
    except Exception as exc:  # noqa: BLE001 - the job must not sit RUNNING until its lease expires
        # Only the class name is logged: a message could carry row values.
        logger.error("reevaluation job=%s write-back error=%s", job.ref, type(exc).__name__)
        code = "CONFIRMED_PROTECTED" if isinstance(exc, ConfirmedInvariantViolated) else "WORKER_ERROR"
        return job_fail_transient(fence, code=code)


def _finish_stale(fence: Fence) -> str:
    updated = fenced(fence).update(
        state=JobState.STALE,
        lease_owner="",
        lease_expires_at=None,
        finished_at=timezone.now(),
        version=F("version") + 1,
    )
    return JobState.STALE if updated else "LEASE_LOST"


def _count_failure(clinic_id: int) -> None:
    ClinicReevaluationSettings.objects.filter(clinic_id=clinic_id).update(
        consecutive_assessment_failures=F("consecutive_assessment_failures") + 1
    )


def job_fail_transient(fence: Fence, *, code: str, now: datetime | None = None) -> str:
    """RETRY_WAIT with an exponential cooldown, or FAILED once ``max_attempts`` is spent."""
    now = now or timezone.now()
    with transaction.atomic():
        job = fenced(fence).select_for_update(no_key=True).first()
        if job is None:
            return "LEASE_LOST"
        exhausted = job.attempts >= job.max_attempts
        fenced(fence).update(
            state=JobState.FAILED if exhausted else JobState.RETRY_WAIT,
            last_failure_code=code,
            next_attempt_at=None if exhausted else now + retry_delay(job, job.attempts),
            lease_owner="",
            lease_expires_at=None,
            finished_at=now if exhausted else None,
            version=F("version") + 1,
        )
        _count_failure(job.clinic_id)
    logger.info("reevaluation job=%s failed code=%s exhausted=%s", job.ref, code, exhausted)
    return JobState.FAILED if exhausted else JobState.RETRY_WAIT


def job_quarantine(fence: Fence, *, error: AssessmentError) -> str:
    """Trust, privacy or contract failure: FAILED (no generic retry) and a quarantine case."""
    with transaction.atomic():
        job = fenced(fence).select_for_update(no_key=True).first()
        if job is None:
            return "LEASE_LOST"
        fenced(fence).update(
            state=JobState.FAILED,
            last_failure_code=error.code,
            lease_owner="",
            lease_expires_at=None,
            finished_at=timezone.now(),
            version=F("version") + 1,
        )
        QuarantineCase.objects.create(
            reason_code=error.code,
            category=QUARANTINE_CATEGORY[error.code],
            evidence_digest=error.evidence_digest,
            evidence_size=error.evidence_size,
            source="ASSESSMENT",
            event_id=job.event.event_id,
            tenant_group_id=job.tenant_group_id,
            clinic_id=job.clinic_id,
            job=job,
            correlation_id=new_correlation_id(),
        )
        _count_failure(job.clinic_id)
        quarantine_watch(job.clinic_id)  # repeated quarantine drains the clinic
    logger.warning("reevaluation job=%s quarantined code=%s", job.ref, error.code)
    return JobState.FAILED


# --- outcomes -----------------------------------------------------------------------------------


@dataclass
class Decision:
    appointment: Appointment
    outcome: str
    applied: bool = False
    replacement_ref: str = ""


def _fits(appt: Appointment, c: Constraints) -> bool:
    minutes = (appt.ends_at - appt.starts_at).total_seconds() / 60
    return (
        (c.required_practitioner is None or appt.practitioner.ref == c.required_practitioner)
        and (c.allowed_treatments is None or appt.treatment.ref in c.allowed_treatments)
        and (c.minimum_slot_minutes is None or minutes >= c.minimum_slot_minutes)
        and (c.resource_need is None or (appt.resource is not None and appt.resource.kind == c.resource_need))
    )


def _replacement_specs(appt: Appointment, c: Constraints) -> list[dict]:
    """Practitioner/treatment/resource combinations that satisfy ``c`` at the same start time."""
    practitioner: Practitioner | None = appt.practitioner
    if c.required_practitioner is not None:
        practitioner = Practitioner.objects.filter(
            clinic_id=appt.clinic_id, ref=c.required_practitioner, active=True
        ).first()
        if practitioner is None:
            return []
    treatments = Treatment.objects.filter(clinic_id=appt.clinic_id).order_by("pk")
    if c.allowed_treatments is not None:
        treatments = treatments.filter(ref__in=c.allowed_treatments)
    if c.minimum_slot_minutes is not None:
        treatments = treatments.filter(duration_minutes__gte=c.minimum_slot_minutes)
    treatment_list = list(treatments[:20])
    treatment_list.sort(key=lambda t: t.pk != appt.treatment_id)  # prefer keeping the treatment
    if not treatment_list:
        return []
    if c.resource_need is not None:
        resources = list(
            Resource.objects.filter(clinic_id=appt.clinic_id, kind=c.resource_need).order_by("pk")[:10]
        )
        resources.sort(key=lambda r: r.pk != appt.resource_id)
        if not resources:
            return []
    else:
        resources = [appt.resource]  # type: ignore[list-item]  # None: the appointment has no resource
    return [
        {"practitioner": practitioner, "treatment": treatment_list[0], "resource": resource}
        for resource in resources
    ]


def _replace(appt: Appointment, spec: dict, *, status: str, reason: str) -> Appointment:
    """Cancel ``appt`` and book its replacement in one savepoint (HELD: under the exclusion constraint)."""
    with transaction.atomic():
        appointment_cancel(
            clinic=appt.clinic, appointment_ref=appt.ref, reason=reason, expected_version=appt.version
        )
        return appointment_book(
            clinic=appt.clinic,
            patient=appt.patient,
            practitioner=spec["practitioner"],
            treatment=spec["treatment"],
            resource=spec["resource"],
            starts_at=appt.starts_at,
            status=status,
        )


def _decide_proposed(appt: Appointment, a: Assessment, material: bool, apply: bool) -> Decision:
    if not material or _fits(appt, a.constraints):
        return Decision(appt, Outcome.SKIPPED_UNCHANGED)
    specs = _replacement_specs(appt, a.constraints)
    if not specs:
        # No feasible replacement: the proposal stays as it is and the job asks staff to decide.
        return Decision(appt, Outcome.PROPOSAL_NEEDS_STAFF)
    if not apply:
        return Decision(appt, Outcome.PROPOSAL_SUPERSEDED)
    new = _replace(appt, specs[0], status=AppointmentStatus.PROPOSED, reason="reevaluation:superseded")
    return Decision(appt, Outcome.PROPOSAL_SUPERSEDED, applied=True, replacement_ref=new.ref)


def _decide_held(appt: Appointment, a: Assessment, material: bool, apply: bool) -> Decision:
    if not material:
        return Decision(appt, Outcome.SKIPPED_UNCHANGED)
    if _fits(appt, a.constraints):
        return Decision(appt, Outcome.HOLD_KEPT)
    for spec in _replacement_specs(appt, a.constraints):
        try:
            with transaction.atomic():
                new = _replace(appt, spec, status=AppointmentStatus.HELD, reason="reevaluation:hold_replaced")
                if not apply:
                    raise _Rollback  # dry run: the trial tells us the outcome, then is undone
            return Decision(appt, Outcome.HOLD_REPLACED, applied=True, replacement_ref=new.ref)
        except _Rollback:
            return Decision(appt, Outcome.HOLD_REPLACED)
        except SlotOccupied:
            continue
    if not apply:
        return Decision(appt, Outcome.FALLBACK_TO_PROPOSED)
    appointment_set_status(
        clinic=appt.clinic,
        appointment_ref=appt.ref,
        target=AppointmentStatus.PROPOSED,
        expected_version=appt.version,
    )
    return Decision(appt, Outcome.FALLBACK_TO_PROPOSED, applied=True)


def _confirmed_digest(clinic_id: int, fingerprint: str, pks: set[int] | None = None) -> dict:
    queryset = Appointment.objects.filter(clinic_id=clinic_id)
    if pks is None:
        queryset = queryset.filter(patient__crm_fingerprint=fingerprint, status=AppointmentStatus.CONFIRMED)
    else:
        queryset = queryset.filter(pk__in=pks)
    return {row["id"]: row for row in queryset.values()}


def job_complete(fence: Fence, *, assessment: Assessment) -> str:
    """Record outcomes (applying them as the clinic's mode allows) and complete the job, fenced."""
    now = timezone.now()
    with transaction.atomic():
        probe = ReevaluationJob.objects.filter(pk=fence.job_id).values(
            "clinic_id", "tenant_group_id", "fingerprint"
        )
        scope = probe.first()
        if scope is None:
            return "LEASE_LOST"
        # Lock order: head before job (as intake does), then appointments through scheduling.
        head = ReevaluationHead.objects.select_for_update(no_key=True).filter(**scope).first()
        # of=self: the joined clinic, tenant group and event are read, never locked (a clinic row lock
        # blocked every insert that references the clinic, FOR KEY SHARE, and deadlocked job runs).
        job = (
            fenced(fence)
            .select_for_update(of=("self",), no_key=True)
            .select_related("clinic__tenant_group", "event")
            .first()
        )
        if job is None:
            return "LEASE_LOST"
        if head is not None and job.revision < head.revision:
            return _finish_stale(fence)
        if not _policy_advance(job, assessment):
            raise PolicyWentBack(job.ref)
        mode = (
            ClinicReevaluationSettings.objects.filter(clinic_id=job.clinic_id)
            .values_list("mutation_mode", flat=True)
            .first()
            or MutationMode.DISABLED
        )
        confirmed_before = _confirmed_digest(job.clinic_id, job.fingerprint)
        decisions = _decide_all(job, assessment, mode)
        confirmed_after = _confirmed_digest(job.clinic_id, job.fingerprint, set(confirmed_before))
        if confirmed_after != confirmed_before or len(
            _confirmed_digest(job.clinic_id, job.fingerprint)
        ) != len(confirmed_before):
            raise ConfirmedInvariantViolated(f"job {job.ref}")
        ReevaluationOutcome.objects.bulk_create(
            [
                ReevaluationOutcome(
                    tenant_group_id=job.tenant_group_id,
                    clinic_id=job.clinic_id,
                    job=job,
                    appointment_ref=d.appointment.ref,
                    status_before=d.appointment.status,
                    outcome=d.outcome,
                    applied=d.applied,
                    mode=mode,
                    replacement_ref=d.replacement_ref,
                )
                for d in decisions
            ]
        )
        counts = dict(sorted(Counter(str(d.outcome) for d in decisions).items()))
        # The newest completed run of a scope is the one staff act on: older asks are settled.
        ReevaluationJob.objects.filter(
            clinic_id=job.clinic_id, tenant_group_id=job.tenant_group_id, fingerprint=job.fingerprint,
            needs_staff=True,
        ).update(needs_staff=False, version=F("version") + 1)
        updated = fenced(fence).update(
            state=JobState.COMPLETED,
            outcome_counts=counts,
            needs_staff=Outcome.PROPOSAL_NEEDS_STAFF in counts,
            target_policy_ref=assessment.policy_ref,
            target_policy_generation=assessment.policy_generation,
            last_failure_code="",
            lease_owner="",
            lease_expires_at=None,
            finished_at=now,
            version=F("version") + 1,
        )
        if updated != 1:  # cannot happen while we hold the row lock; refuse rather than guess
            raise Conflict("The job's lease was lost.", code="LEASE_LOST")
        ClinicReevaluationSettings.objects.filter(clinic_id=job.clinic_id).update(
            consecutive_assessment_failures=0
        )
        outbox_enqueue(
            topic=JOB_COMPLETED_TOPIC,
            tenant_group_ref=job.clinic.tenant_group.ref,
            clinic_ref=job.clinic.ref,
            aggregate_ref=job.ref,
            # The patient told of an applied change (contact caps count per recipient); refs only.
            recipient_ref=next(
                (d.appointment.patient.ref for d in decisions if d.applied and d.outcome in CHANGE_OUTCOMES), ""
            ),
            payload={
                "job": job.ref,
                "revision": job.revision,
                "mode": mode,
                "state": JobState.COMPLETED,
                "outcome_counts": counts,
                "policy_ref": assessment.policy_ref,
                "policy_generation": assessment.policy_generation,
            },
        )
    logger.info("reevaluation job=%s completed mode=%s outcomes=%s", job.ref, mode, counts)
    return JobState.COMPLETED


def _policy_advance(job: ReevaluationJob, assessment: Assessment) -> bool:
    """Accept the assessment's policy only at or past the clinic's current one, and advance to it.

    Same generation: the policy ref must match. A higher generation may name a new policy ref. One
    conditional UPDATE (row-locked until commit), so concurrent runs cannot move the clinic back.
    """
    settings_for(job.clinic)
    same = Q(policy_generation=assessment.policy_generation, policy_ref=assessment.policy_ref)
    newer = Q(policy_generation__isnull=True) | Q(policy_generation__lt=assessment.policy_generation)
    updated = (
        ClinicReevaluationSettings.objects.filter(clinic_id=job.clinic_id)
        .filter(same | newer)
        .update(policy_ref=assessment.policy_ref, policy_generation=assessment.policy_generation)
    )
    return updated == 1


def _decide_all(job: ReevaluationJob, assessment: Assessment, mode: str) -> list[Decision]:
    apply_proposed = mode in (MutationMode.APPLY_PROPOSED, MutationMode.APPLY_PROPOSED_AND_HELD)
    apply_held = mode == MutationMode.APPLY_PROPOSED_AND_HELD
    current = list(
        Appointment.objects.select_related("clinic", "patient", "practitioner", "treatment", "resource")
        .filter(clinic_id=job.clinic_id, patient__crm_fingerprint=job.fingerprint, status__in=ELIGIBLE)
        .order_by("pk")
    )
    seen = {a.ref for a in current}
    decisions: list[Decision] = []
    # Targets known at intake that are no longer PROPOSED/HELD (confirmed or cancelled since): protected.
    gone = [ref for ref in [*job.held_targets, *job.proposed_targets] if ref not in seen]
    for appt in Appointment.objects.filter(clinic_id=job.clinic_id, ref__in=gone).order_by("pk"):
        decisions.append(Decision(appt, Outcome.SKIPPED_INELIGIBLE))
    for appt in current:
        try:
            with transaction.atomic():
                if appt.status == AppointmentStatus.HELD:
                    decisions.append(_decide_held(appt, assessment, job.material_change, apply_held))
                else:
                    decisions.append(_decide_proposed(appt, assessment, job.material_change, apply_proposed))
        except (Conflict, NotFound):
            # Changed by someone else since we read it (e.g. confirmed by staff): leave it alone.
            decisions.append(Decision(appt, Outcome.SKIPPED_INELIGIBLE))
    return decisions
