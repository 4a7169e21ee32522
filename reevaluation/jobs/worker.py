"""The worker: take over a claimed lease (or claim with its own token, ``work_round``), fetch the assessment (no
transaction open), then write back in one fenced transaction, read first, decide, then write:

1. **read**: ``queries.job_facts``, every fact in one call: the scope's appointments; with nothing in scope and no
   intake target, nothing more (no lock). Otherwise the head and the job locked (the fence; a newer revision:
   STALE), the policy advanced (the clinic's mode), the intake targets gone since, and what a replacement may take
   (a lazy ``decisions.Catalogue``);
2. **decide**: ``decisions.plan``, a pure function (the rounds ask it too): whether the job is quiet, and every
   appointment's step at once;
3. **write**: a quiet job completes fenced (only while no newer revision heads its scope) and advances the policy;
   otherwise the plan is carried out (``_decide_all``: the job's appointment changes in one scheduling command,
   ``appointments_apply_changes``, then its proposals), the outcomes recorded; then the fenced completion with its
   settle (``common.cas.cas_update_settling``) and the notice.

CONFIRMED appointments are never passed to a scheduling command; as a second line of defence the write-back
digests the scope's CONFIRMED rows before and after and rolls back if they differ.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from common.cas import cas_update_settling
from common.errors import Conflict
from common.services import new_correlation_id, outbox_enqueue
from reevaluation import decisions as rules
from reevaluation import queries
from reevaluation.assessment import Assessment, AssessmentClient, AssessmentError, AssessmentFetcher
from reevaluation.jobs.claim import Claim
from reevaluation.jobs.leases import (
    Fence,
    LeaseKeeper,
    fenced_update,
    head_revision,
    lease_start,
    retry_delay,
)
from reevaluation.models import (
    CHANGE_OUTCOMES,
    JOB_COMPLETED_TOPIC,
    QUARANTINE_CATEGORY,
    ClinicReevaluationSettings,
    JobState,
    Outcome,
    QuarantineCase,
    QuarantineReason,
    ReevaluationHead,
    ReevaluationJob,
    ReevaluationOutcome,
)
from reevaluation.modes.services import privacy_stop, quarantine_watch
from reevaluation.proposals.services import proposal_open, supersede_live
from scheduling.models import (
    Appointment,
    AppointmentStatus,
    CancelActor,
    CancelReason,
    cancel_actor_ref,
)
from scheduling.services import (
    AppointmentChange,
    ChangeDone,
    ChangeResult,
    HeldReplace,
    HeldReplacement,
    Rebook,
    StatusChange,
    appointments_apply_changes,
)

logger = logging.getLogger(__name__)


#: Who cancels what a reevaluation replaces (a system job, by name).
CANCELLED_BY = cancel_actor_ref(CancelActor.SYSTEM, "reevaluation")


class ConfirmedInvariantViolated(RuntimeError):
    """A CONFIRMED appointment changed during a reevaluation write-back (never expected)."""


class PolicyWentBack(Exception):
    """The assessment's policy generation is older than (or conflicts with) the clinic's current one."""


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
    job = _load(job_id)
    return _run(fence, job, head_revision(job), client=client, heartbeat=heartbeat)


def job_run_claimed(claim: Claim, *, client: AssessmentClient | None = None, heartbeat: bool = False) -> str:
    """Run a job this worker claimed itself (``dispatch_round(for_worker=True)``): the claim already
    holds the lease under the worker's token and carries the job and its head's revision."""
    if claim.job is None:
        raise LookupError(f"claim of {claim.job_ref} carries no job (not a worker's own claim)")
    fence = Fence(claim.job_id, claim.owner, claim.attempt)  # ``claim.fence``, read here (the walk stays here)
    return _run(fence, claim.job, claim.head_revision, client=client, heartbeat=heartbeat)


def _load(job_id: int) -> ReevaluationJob:
    job = ReevaluationJob.objects.select_related("clinic__tenant_group").get(pk=job_id)
    job.clinic_ref, job.tenant_group_ref = job.clinic.ref, job.clinic.tenant_group.ref
    return job


def _run(fence: Fence, job: ReevaluationJob, head: int | None, *, client, heartbeat: bool) -> str:
    assessment = fetch_assessment(fence, job, head, client=client, heartbeat=heartbeat)
    return assessment if isinstance(assessment, str) else write_back(fence, job, assessment)


def fetch_assessment(
    fence: Fence, job: ReevaluationJob, head: int | None, *, client, heartbeat: bool
) -> Assessment | str:
    """The job's assessment, or the job's resulting state when there is none to write back."""
    if head is not None and job.revision < head:
        return _finish_stale(fence)
    client = client or AssessmentClient()
    try:
        # No transaction is open while we wait on the CRM; the keeper renews the lease meanwhile.
        with LeaseKeeper(fence) if heartbeat else nullcontext():
            return client.fetch(
                assessment_ref=job.assessment_ref, revision=job.revision, expected_hash=job.assessment_hash
            )
    except AssessmentError as exc:
        if exc.transient:
            return job_fail_transient(fence, code=exc.code)
        return job_quarantine(fence, error=exc)


def write_back(fence: Fence, job: ReevaluationJob, assessment: Assessment) -> str:
    try:
        return job_complete(fence, assessment=assessment, job=job)
    except PolicyWentBack:
        evidence = f"{assessment.policy_ref}:{assessment.policy_generation}".encode()
        return job_quarantine(fence, error=AssessmentError("ASSESSMENT_POLICY_STALE", evidence))
    except Exception as exc:  # noqa: BLE001 - the job must not sit RUNNING until its lease expires
        # Only the class name is logged: a message could carry row values.
        logger.error("reevaluation job=%s write-back error=%s", job.ref, type(exc).__name__)
        code = "CONFIRMED_PROTECTED" if isinstance(exc, ConfirmedInvariantViolated) else "WORKER_ERROR"
        return job_fail_transient(fence, code=code)


# --- the write-back: read, decide, write ---------------------------------------------------------------------


def job_complete(fence: Fence, *, assessment: Assessment, job: ReevaluationJob | None = None) -> str:
    """Decide every appointment of the job's scope and carry the decisions out (as the clinic's mode allows), then
    complete the job, fenced: one transaction. Read (``queries.job_facts``), decide (``decisions.plan``), write."""
    now = timezone.now()
    if job is None:
        job = ReevaluationJob.objects.select_related("clinic__tenant_group").filter(pk=fence.job_id).first()
        if job is None:
            return "LEASE_LOST"
        job.clinic_ref, job.tenant_group_ref = job.clinic.ref, job.clinic.tenant_group.ref
    c = assessment.constraints
    with transaction.atomic():
        facts = queries.job_facts(fence, job, assessment, now)
        if facts.ended:
            return _finish_stale(fence) if facts.ended == JobState.STALE else facts.ended
        if facts.locked and facts.mode is None:
            raise PolicyWentBack(job.ref)
        plan = rules.plan(material=job.material_change, constraints=c, current=facts.current, gone=facts.gone or [],
                          confirmed=facts.confirmed, catalogue=facts.catalogue, targets=facts.targets)
        if plan.quiet or not facts.locked:  # nothing to decide (the read locked nothing)
            return _complete_quiet(fence, facts, job, assessment, now)
        mode = facts.mode or ""
        # Write: the plan carried out, between two digests of the CONFIRMED rows; then the completion.
        scope = [(job.clinic_id, job.fingerprint)]
        confirmed_before = confirmed_digest(scope)
        decisions = _decide_all(job, plan, mode, now)
        if confirmed_digest(scope) != confirmed_before:
            raise ConfirmedInvariantViolated(f"job {job.ref}")
        ReevaluationOutcome.objects.bulk_create(outcome_rows(job, mode, decisions))
        tally = rules.tally(d.outcome for d in decisions)
        if not _finish_completed(fence, facts, job, assessment, tally, now):
            # Cannot happen while we hold the row lock; refuse rather than guess.
            raise Conflict("The job's lease was lost.", code="LEASE_LOST")
        _completed_notice(job, assessment, mode, tally.counts, decisions)
    logger.info("reevaluation job=%s completed mode=%s outcomes=%s", job.ref, mode, tally.counts)
    return JobState.COMPLETED


@dataclass
class Decision:
    """An appointment's outcome as carried out: what the outcome row records."""

    appointment: Appointment
    outcome: str
    applied: bool = False
    replacement: Appointment | None = None  # the appointment booked in its place, if any
    proposal: Any = None  # the AppointmentProposal made to the patient, if any

    @property
    def replacement_ref(self) -> str:
        return self.replacement.ref if self.replacement is not None else ""


def _decide_all(job: ReevaluationJob, plan: rules.Plan, mode: str, now) -> list[Decision]:
    """The write step, which settles every appointment's outcome: as the plan decided it, the change made where the
    clinic's ``mode`` applies it (the step's fallback recorded where it cannot be made), then the proposals the
    applied changes ask for. The job's appointment changes are one scheduling command (``appointments_apply_changes``:
    a superseded PROPOSED rebooked, a HELD replaced by the first of its combinations whose slot is free, or tried and
    undone in a dry run, or back to PROPOSED); the proposals follow, in plan order."""
    changes: dict[int, AppointmentChange] = {}
    for i, step in enumerate(plan.steps):
        appt, apply = step.row, mode in step.applied_in
        if step.outcome == Outcome.PROPOSAL_SUPERSEDED and apply:
            spec = step.specs[0]
            changes[i] = Rebook(appointment=appt, practitioner=spec["practitioner"], treatment=spec["treatment"],
                                resource=spec["resource"], reason="reevaluation:superseded",
                                reason_code=CancelReason.RESCHEDULED, cancelled_by=CANCELLED_BY)
        elif step.outcome == Outcome.HOLD_REPLACED:
            changes[i] = HeldReplace(options=tuple(
                HeldReplacement(appointment=appt, practitioner=spec["practitioner"], treatment=spec["treatment"],
                                resource=spec["resource"], reason="reevaluation:hold_replaced",
                                reason_code=CancelReason.RESCHEDULED, cancelled_by=CANCELLED_BY)
                for spec in step.specs
            ), release_if_taken=apply, trial=not apply)
        elif step.outcome == Outcome.FALLBACK_TO_PROPOSED and apply:
            changes[i] = StatusChange(appointment=appt, target=AppointmentStatus.PROPOSED)
    done = dict(zip(changes, appointments_apply_changes(changes=list(changes.values())), strict=True)) \
        if changes else {}
    decisions = []
    for i, step in enumerate(plan.steps):
        appt = step.row
        if i in done:
            decisions.append(_carried_out(step, done[i]))
        elif step.outcome == Outcome.CONFIRMED_CHANGE_PROPOSED and mode in step.applied_in:
            # Never changed: the patient is proposed the fitting times (none could be held: staff are asked).
            proposal = proposal_open(job=job, appointment=appt, trigger="CONFIRMED_NO_LONGER_FITS",
                                     specs=list(step.specs), now=now)
            decisions.append(Decision(appt, step.outcome, applied=True, proposal=proposal) if proposal
                             else Decision(appt, step.fallback or step.outcome))
        else:
            decisions.append(Decision(appt, step.outcome))
    _open_proposals(job, plan.steps, decisions, now)
    return decisions


def _carried_out(step: rules.Step, done: ChangeDone) -> Decision:
    """A step's decision once scheduling carried its change out (or refused it: changed by someone else since we
    read it, e.g. confirmed by staff, so it is left alone)."""
    appt = step.row
    if done.result == ChangeResult.APPLIED:
        outcome = Outcome.FALLBACK_TO_PROPOSED if isinstance(done.change, StatusChange) else step.outcome
        return Decision(appt, outcome, applied=True, replacement=done.booked)
    if done.result == ChangeResult.RELEASED:
        return Decision(appt, Outcome.FALLBACK_TO_PROPOSED, applied=True)
    if done.result == ChangeResult.WOULD_APPLY:
        return Decision(appt, step.outcome)
    if done.result == ChangeResult.SLOTS_TAKEN:
        return Decision(appt, step.fallback or step.outcome)
    return Decision(appt, Outcome.SKIPPED_INELIGIBLE)


def _open_proposals(job: ReevaluationJob, steps, decisions: list[Decision], now) -> None:
    """Applied changes to a PROPOSED or HELD appointment become proposals the patient can accept (the new time held
    for them): a superseded proposal's replacement at its own time, or the fitting times of a HELD one that fell
    back. Live proposals about an appointment this run cancelled or changed end SUPERSEDED first."""
    changed = [(s, d) for s, d in zip(steps, decisions, strict=True) if d.applied and d.outcome in CHANGE_OUTCOMES]
    if not changed:
        return
    supersede_live(clinic_id=job.clinic_id, appointment_refs=[d.appointment.ref for _, d in changed], now=now)
    for step, d in changed:
        if d.outcome == Outcome.PROPOSAL_SUPERSEDED and d.replacement is not None:
            new = d.replacement
            spec = {"practitioner": new.practitioner, "treatment": new.treatment, "resource": new.resource}
            d.proposal = proposal_open(job=job, appointment=new, trigger="PROPOSAL_SUPERSEDED", specs=[],
                                       now=now, fixed=[(new.starts_at, spec)])
        elif d.outcome == Outcome.FALLBACK_TO_PROPOSED:
            fresh = _appointment(job, d.appointment.ref)  # PROPOSED now, at its new version
            d.proposal = proposal_open(job=job, appointment=fresh, trigger="FALLBACK_TO_PROPOSED",
                                       specs=list(step.specs), now=now)


def _appointment(job: ReevaluationJob, ref: str) -> Appointment:
    return Appointment.objects.select_related("clinic", "patient", "practitioner", "treatment", "resource").get(
        clinic_id=job.clinic_id, ref=ref)


def confirmed_digest(scopes: list[tuple[int, str]]) -> dict:
    """Every column of the CONFIRMED appointments of the scopes' patients ((clinic id, fingerprint) pairs),
    by id: equal before and after a write-back, or a CONFIRMED row was changed, left CONFIRMED or was made.
    One SELECT over the clinics and fingerprints, the pairs kept here."""
    wanted = set(scopes)
    rows = (
        Appointment.objects.filter(
            clinic_id__in={c for c, _ in wanted}, patient__crm_fingerprint__in={f for _, f in wanted},
            status=AppointmentStatus.CONFIRMED,
        )
        .annotate(scope_fingerprint=F("patient__crm_fingerprint"))
        .values()
    )
    return {row["id"]: row for row in rows if (row["clinic_id"], row["scope_fingerprint"]) in wanted}


def outcome_rows(job: ReevaluationJob, mode: str, decisions: list[Decision]) -> list[ReevaluationOutcome]:
    """The job's outcome rows, unsaved: one per decision."""
    return [
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
            assessment_ref=job.assessment_ref,
            assessment_hash=job.assessment_hash,
            proposal=d.proposal,
        )
        for d in decisions
    ]


def _complete_quiet(fence: Fence, facts: queries.JobFacts, job: ReevaluationJob, assessment: Assessment,
                    now) -> str:
    """Nothing to decide: complete fenced (and only while no newer revision heads the scope), advance
    the policy, write the notice. One statement each; the caller's transaction holds them together."""
    newer = ReevaluationHead.objects.filter(**facts.scope, revision__gt=OuterRef("revision"))
    if not _finish_completed(fence, facts, job, assessment, rules.EMPTY_TALLY, now, extra=~Exists(newer)):
        return _finish_stale(fence)  # STALE if the fence still holds (a newer head), else LEASE_LOST
    mode = _policy_advance(job, assessment)  # raises PolicyWentBack: the completion rolls back
    _completed_notice(job, assessment, mode, rules.EMPTY_TALLY.counts, [])
    return JobState.COMPLETED


def _finish_completed(fence: Fence, facts: queries.JobFacts, job, assessment: Assessment, tally: rules.Tally, now,
                      extra=None) -> bool:
    """The fenced completion (``facts.guard``, and ``extra``) with its settle: the newest completed run of a scope is
    the one staff act on, so the scope's older needs-staff asks are settled. One command (``common.cas``)."""
    result = {"outcome_counts": tally.counts, "needs_staff": tally.needs_staff, "last_failure_code": ""}
    target = {"target_policy_ref": assessment.policy_ref, "target_policy_generation": assessment.policy_generation}
    older = ReevaluationJob.objects.filter(**facts.scope, needs_staff=True).exclude(pk=fence.job_id)
    return cas_update_settling(
        ReevaluationJob, pk=fence.job_id, expected_status=JobState.RUNNING,
        fence=facts.guard & extra if extra is not None else facts.guard, settle=older, settled={"needs_staff": False},
        state=JobState.COMPLETED, **result, **target, **_released(now),
    )


def _completed_notice(job, assessment: Assessment, mode: str, counts: dict, decisions: list) -> None:
    outbox_enqueue(topic=JOB_COMPLETED_TOPIC, **completion_notice(job, assessment, mode, counts, decisions))


def completion_notice(job, assessment: Assessment, mode: str, counts: dict, decisions: list) -> dict:
    """The ``job_completed`` outbox message of a job, but its topic (refs, states and counts only)."""
    return {
        "tenant_group_ref": job.tenant_group_ref,
        "clinic_ref": job.clinic_ref,
        "aggregate_ref": job.ref,
        # The patient told of an applied change (contact caps count per recipient); refs only.
        "recipient_ref": next(
            (d.appointment.patient.ref for d in decisions
             if d.applied and (d.outcome in CHANGE_OUTCOMES or d.proposal is not None)), ""
        ),
        "payload": {
            "job": job.ref,
            "revision": job.revision,
            "mode": mode,
            "state": JobState.COMPLETED,
            "outcome_counts": dict(counts),  # its own copy (a quiet job's counts are the shared EMPTY_TALLY's)
            "policy_ref": assessment.policy_ref,
            "policy_generation": assessment.policy_generation,
        },
    }


def _policy_advance(job: ReevaluationJob, assessment: Assessment) -> str:
    """Accept the assessment's policy only at or past the clinic's current one, advance to it, reset the
    failure streak, and return the clinic's mutation mode: one conditional UPDATE (row-locked until
    commit), so concurrent runs cannot move the clinic back and the mode read is the locked row's
    (``queries.policy_accept``; a job with something to decide advances it in its read, ``queries.job_facts``).

    Same generation: the policy ref must match. A higher generation may name a new policy ref.
    Raises PolicyWentBack otherwise.
    """
    mode = queries.policy_accept(job, ref=assessment.policy_ref, generation=assessment.policy_generation)
    if mode is None:
        raise PolicyWentBack(job.ref)
    return mode


# --- a run that ends without outcomes: stale, failed, quarantined ---------------------------------------------


def _finish_stale(fence: Fence) -> str:
    finished = fenced_update(fence, state=JobState.STALE, **_released(timezone.now()))
    return JobState.STALE if finished else "LEASE_LOST"


def _released(finished_at) -> dict:
    """The lease columns of a job that has finished."""
    return {"lease_owner": "", "lease_expires_at": None, "finished_at": finished_at}


def _count_failure(clinic_id: int) -> None:
    ClinicReevaluationSettings.objects.filter(clinic_id=clinic_id).update(
        consecutive_assessment_failures=F("consecutive_assessment_failures") + 1
    )


def job_fail_transient(fence: Fence, *, code: str, now: datetime | None = None) -> str:
    """RETRY_WAIT with an exponential cooldown, or FAILED once ``max_attempts`` is spent."""
    now = now or timezone.now()
    with transaction.atomic():
        job = queries.fenced_job(fence).select_for_update(no_key=True).first()
        if job is None:
            return "LEASE_LOST"
        exhausted = job.attempts >= job.max_attempts
        fenced_update(
            fence,
            state=JobState.FAILED if exhausted else JobState.RETRY_WAIT,
            last_failure_code=code,
            next_attempt_at=None if exhausted else now + retry_delay(job, job.attempts),
            lease_owner="",
            lease_expires_at=None,
            finished_at=now if exhausted else None,
        )
        _count_failure(job.clinic_id)
    logger.info("reevaluation job=%s failed code=%s exhausted=%s", job.ref, code, exhausted)
    return JobState.FAILED if exhausted else JobState.RETRY_WAIT


def job_quarantine(fence: Fence, *, error: AssessmentError) -> str:
    """Trust, privacy or contract failure: FAILED (no generic retry) and a quarantine case."""
    with transaction.atomic():
        job = queries.fenced_job(fence).select_for_update(no_key=True).first()
        if job is None:
            return "LEASE_LOST"
        fenced_update(
            fence,
            state=JobState.FAILED,
            last_failure_code=error.code,
            lease_owner="",
            lease_expires_at=None,
            finished_at=timezone.now(),
        )
        case = QuarantineCase.objects.create(
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
        if error.code == QuarantineReason.PRIVACY_BOUNDARY:
            # The CRM's own authenticated API sent raw profile data: stop the clinic's consumer at once.
            privacy_stop(job.clinic_id, case_ref=case.ref, source="ASSESSMENT")
    logger.warning("reevaluation job=%s quarantined code=%s", job.ref, error.code)
    return JobState.FAILED


