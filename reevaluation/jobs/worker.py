"""The worker: take over a claimed lease (or claim with its own token, ``work_round``), fetch the
assessment (no transaction open), then record one outcome per PROPOSED/HELD appointment and complete
the job in one fenced transaction.

CONFIRMED appointments are never passed to a scheduling command; as a second line of defence the
write-back digests the scope's CONFIRMED rows before and after and rolls back if they differ. A
scope with no PROPOSED/HELD appointment (and none recorded at intake) has nothing to decide: its
write-back is the fenced completion, the policy advance and the outbox row, nothing more.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as dj_settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from common.errors import Conflict, NotFound, SlotOccupied
from common.services import new_correlation_id, outbox_enqueue
from reevaluation import decisions as rules
from reevaluation import queries
from reevaluation.assessment import Assessment, AssessmentClient, AssessmentError, AssessmentFetcher, Constraints
from reevaluation.decisions import Slot
from reevaluation.jobs.claim import Claim
from reevaluation.jobs.leases import (
    Fence,
    fenced,
    fenced_complete,
    fenced_update,
    head_revision,
    lease_renew,
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
from reevaluation.modes.services import privacy_stop, quarantine_watch, settings_for
from reevaluation.proposals.services import proposal_open, supersede_live
from scheduling.models import (
    Appointment,
    AppointmentStatus,
    CancelActor,
    CancelReason,
    Practitioner,
    Resource,
    Treatment,
    cancel_actor_ref,
)
from scheduling.services import (
    HeldReplacement,
    appointment_book,
    appointment_cancel,
    appointment_set_status,
    appointments_replace_held,
)

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
    taken = fenced_update(
        claim,
        extra={"lease_expires_at__gt": now},
        lease_owner=owner,
        lease_renewed_at=now,
        lease_expires_at=now + timedelta(seconds=dj_settings.REEVALUATION_LEASE_SECONDS),
    )
    return Fence(claim.job_id, owner, claim.attempt) if taken else None


class LeaseKeeper:
    """Renews leases (one job's, or a round's) from a background thread while the worker waits on the CRM.
    A lease that is lost is not renewed again; the others still are."""

    def __init__(self, *fences: Fence, interval: float | None = None):
        self.fences = list(fences)
        self.interval = interval or max(dj_settings.REEVALUATION_LEASE_SECONDS / 3, 1)
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while self.fences and not self._stop.wait(self.interval):
                kept = [fence for fence in self.fences if lease_renew(fence)]
                self.lost = self.lost or len(kept) < len(self.fences)
                self.fences = kept
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
        job = fenced(fence).select_for_update(no_key=True).first()
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
        job = fenced(fence).select_for_update(no_key=True).first()
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


# --- outcomes -----------------------------------------------------------------------------------


@dataclass
class Decision:
    appointment: Appointment
    outcome: str
    applied: bool = False
    replacement_ref: str = ""
    proposal: Any = None  # the AppointmentProposal made to the patient, if any


def slot_of(appt: Appointment) -> Slot:
    return Slot(practitioner_ref=appt.practitioner.ref, treatment_ref=appt.treatment.ref,
                minutes=(appt.ends_at - appt.starts_at).total_seconds() / 60,
                resource_kind=appt.resource.kind if appt.resource is not None else None)


def fits(appt: Appointment, c: Constraints) -> bool:
    """``decisions.fits`` for an appointment row."""
    return rules.fits(slot_of(appt), c)


def replacement_choice(
    appt: Appointment, c: Constraints, *, named: Callable[[str], Practitioner | None], treatments: Iterable[Treatment]
) -> tuple[Practitioner, Treatment] | None:
    """The practitioner and treatment a replacement of ``appt`` takes: the active practitioner ``c`` names (read
    by ``named``), else the appointment's, and ``decisions.replacement_treatment`` of ``treatments``. One read
    for the one-by-one path and the held batch (``rounds._Choices``, which reads the catalogue once)."""
    practitioner = appt.practitioner if c.required_practitioner is None else named(c.required_practitioner)
    if practitioner is None:
        return None
    treatment = rules.replacement_treatment(list(treatments), c, appt.treatment_id)
    return None if treatment is None else (practitioner, treatment)


def _replacement_specs(appt: Appointment, c: Constraints) -> list[dict]:
    """Practitioner/treatment/resource combinations that satisfy ``c`` at the same start time."""
    choice = replacement_choice(
        appt, c,
        named=lambda ref: Practitioner.objects.filter(clinic_id=appt.clinic_id, ref=ref, active=True).first(),
        treatments=Treatment.objects.filter(clinic_id=appt.clinic_id).order_by("pk"),
    )
    if choice is None:
        return []
    practitioner, treatment = choice
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
        {"practitioner": practitioner, "treatment": treatment, "resource": resource}
        for resource in resources
    ]


def _replace(appt: Appointment, spec: dict, *, status: str, reason: str) -> Appointment:
    """Cancel ``appt`` and book its replacement in one savepoint (HELD: under the exclusion constraint)."""
    with transaction.atomic():
        appointment_cancel(
            clinic=appt.clinic, appointment_ref=appt.ref, reason=reason, expected_version=appt.version,
            reason_code=CancelReason.RESCHEDULED, cancelled_by=cancel_actor_ref(CancelActor.SYSTEM, "reevaluation"),
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
    fitting = fits(appt, a.constraints)
    specs = _replacement_specs(appt, a.constraints) if material and not fitting else []
    outcome = rules.proposed_outcome(material=material, fitting=fitting, replacement=bool(specs))
    if outcome != Outcome.PROPOSAL_SUPERSEDED or not apply:
        return Decision(appt, outcome)
    new = _replace(appt, specs[0], status=AppointmentStatus.PROPOSED, reason="reevaluation:superseded")
    return Decision(appt, outcome, applied=True, replacement_ref=new.ref)


def _decide_held(appt: Appointment, a: Assessment, material: bool, apply: bool) -> Decision:
    fitting = fits(appt, a.constraints)
    specs = _replacement_specs(appt, a.constraints) if material and not fitting else []
    outcome = rules.held_outcome(material=material, fitting=fitting, replacement=bool(specs))
    if outcome != Outcome.HOLD_REPLACED:
        if outcome == Outcome.FALLBACK_TO_PROPOSED and apply:
            return _fall_back(appt)
        return Decision(appt, outcome)
    for spec in specs:
        try:
            with transaction.atomic():
                new = _replace_held(appt, spec)
                if not apply:
                    raise _Rollback  # dry run: the trial tells us the outcome, then is undone
            return Decision(appt, outcome, applied=True, replacement_ref=new.ref)
        except _Rollback:
            return Decision(appt, outcome)
        except SlotOccupied:
            continue
    # Every fitting combination was taken when booked: as if none had been found.
    fallback = rules.held_outcome(material=material, fitting=fitting, replacement=False)
    return _fall_back(appt) if apply else Decision(appt, fallback)


def _replace_held(appt: Appointment, spec: dict) -> Appointment:
    """The HELD appointment cancelled and its replacement booked HELD at the same start: scheduling's one
    command for it (the held batch's too, for many)."""
    return appointments_replace_held(replacements=[HeldReplacement(
        appointment=appt, practitioner=spec["practitioner"], treatment=spec["treatment"], resource=spec["resource"],
        reason="reevaluation:hold_replaced", reason_code=CancelReason.RESCHEDULED,
        cancelled_by=cancel_actor_ref(CancelActor.SYSTEM, "reevaluation"),
    )])[0]


def _fall_back(appt: Appointment) -> Decision:
    appointment_set_status(
        clinic=appt.clinic,
        appointment_ref=appt.ref,
        target=AppointmentStatus.PROPOSED,
        expected_version=appt.version,
    )
    return Decision(appt, Outcome.FALLBACK_TO_PROPOSED, applied=True)


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


def job_complete(fence: Fence, *, assessment: Assessment, job: ReevaluationJob | None = None) -> str:
    """Record outcomes (applying them as the clinic's mode allows) and complete the job, fenced."""
    now = timezone.now()
    if job is None:
        job = ReevaluationJob.objects.select_related("clinic__tenant_group").filter(pk=fence.job_id).first()
        if job is None:
            return "LEASE_LOST"
        job.clinic_ref, job.tenant_group_ref = job.clinic.ref, job.clinic.tenant_group.ref
    with transaction.atomic():
        current, confirmed = _scope_appointments(job, now)
        if rules.quiet(targets=bool(job.held_targets or job.proposed_targets), in_scope=bool(current or confirmed)):
            return _complete_quiet(fence, job, assessment, now)
        # Lock order: head before job (as intake does), then appointments through scheduling.
        head = ReevaluationHead.objects.select_for_update(no_key=True).filter(**_scope(job)).first()
        if fenced(fence).select_for_update(no_key=True).first() is None:
            return "LEASE_LOST"
        if head is not None and job.revision < head.revision:
            return _finish_stale(fence)
        mode = _policy_advance(job, assessment)
        scope = [(job.clinic_id, job.fingerprint)]
        confirmed_before = confirmed_digest(scope)
        decisions = _decide_all(job, assessment, mode, current)
        decisions += _decide_confirmed(job, assessment, mode, confirmed, decisions, now)
        _open_proposals(job, assessment, decisions, now)
        if confirmed_digest(scope) != confirmed_before:
            raise ConfirmedInvariantViolated(f"job {job.ref}")
        ReevaluationOutcome.objects.bulk_create(outcome_rows(job, mode, decisions))
        counts = outcome_counts(decisions)
        if not _finish_completed(fence, job, assessment, counts, now):
            # Cannot happen while we hold the row lock; refuse rather than guess.
            raise Conflict("The job's lease was lost.", code="LEASE_LOST")
        _completed_notice(job, assessment, mode, counts, decisions)
    logger.info("reevaluation job=%s completed mode=%s outcomes=%s", job.ref, mode, counts)
    return JobState.COMPLETED


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


def outcome_counts(decisions: list[Decision]) -> dict:
    return dict(sorted(Counter(str(d.outcome) for d in decisions).items()))


def _complete_quiet(fence: Fence, job: ReevaluationJob, assessment: Assessment, now) -> str:
    """Nothing to decide: complete fenced (and only while no newer revision heads the scope), advance
    the policy, write the notice. One statement each; the caller's transaction holds them together."""
    newer = ReevaluationHead.objects.filter(**_scope(job), revision__gt=OuterRef("revision"))
    if not _finish_completed(fence, job, assessment, {}, now, extra=~Exists(newer)):
        return _finish_stale(fence)  # STALE if the fence still holds (a newer head), else LEASE_LOST
    mode = _policy_advance(job, assessment)  # raises PolicyWentBack: the completion rolls back
    _completed_notice(job, assessment, mode, {}, [])
    return JobState.COMPLETED


def _scope(job: ReevaluationJob) -> dict:
    return {"clinic_id": job.clinic_id, "tenant_group_id": job.tenant_group_id, "fingerprint": job.fingerprint}


def _finish_completed(fence: Fence, job, assessment: Assessment, counts: dict, now, extra=None) -> bool:
    # The newest completed run of a scope is the one staff act on: older asks are settled.
    result = {"outcome_counts": counts, "needs_staff": rules.needs_staff(counts), "last_failure_code": ""}
    target = {"target_policy_ref": assessment.policy_ref, "target_policy_generation": assessment.policy_generation}
    return fenced_complete(fence, scope=_scope(job), extra=extra, **result, **target, **_released(now))


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
            "outcome_counts": counts,
            "policy_ref": assessment.policy_ref,
            "policy_generation": assessment.policy_generation,
        },
    }


def _policy_advance(job: ReevaluationJob, assessment: Assessment) -> str:
    """Accept the assessment's policy only at or past the clinic's current one, advance to it, reset the
    failure streak, and return the clinic's mutation mode: one conditional UPDATE (row-locked until
    commit), so concurrent runs cannot move the clinic back and the mode read is the locked row's.

    Same generation: the policy ref must match. A higher generation may name a new policy ref.
    Raises PolicyWentBack otherwise.
    """
    def advance() -> str | None:
        return queries.policy_advance(
            clinic_id=job.clinic_id, ref=assessment.policy_ref, generation=assessment.policy_generation
        )

    mode = advance()
    if mode is None and not ClinicReevaluationSettings.objects.filter(clinic_id=job.clinic_id).exists():
        settings_for(job.clinic)  # first use of the clinic's settings row; then try once more
        mode = advance()
    if mode is None:
        raise PolicyWentBack(job.ref)
    return mode


def in_scope(now) -> Q:
    """What a job reads of its scope: the PROPOSED/HELD appointments, and the CONFIRMED ones still ahead."""
    return Q(status__in=ELIGIBLE) | Q(status=AppointmentStatus.CONFIRMED, starts_at__gt=now)


def _scope_appointments(job: ReevaluationJob, now) -> tuple[list[Appointment], list[Appointment]]:
    """The scope's PROPOSED/HELD appointments now, and its future CONFIRMED ones, in one SELECT. CONFIRMED
    never enters a scheduling command: it is only compared with the assessment (``_decide_confirmed``)."""
    rows = list(
        Appointment.objects.select_related("clinic", "patient", "practitioner", "treatment", "resource")
        .filter(in_scope(now), clinic_id=job.clinic_id, patient__crm_fingerprint=job.fingerprint)
        .order_by("pk")
    )
    return ([a for a in rows if a.status in ELIGIBLE], [a for a in rows if a.status == AppointmentStatus.CONFIRMED])


def _decide_confirmed(job: ReevaluationJob, a: Assessment, mode: str, confirmed: list[Appointment],
                      decided: list[Decision], now) -> list[Decision]:
    """A future CONFIRMED appointment that no longer fits is never changed: the patient gets a proposal
    (applied modes; a DRY_RUN records that one would be made), or, with no fitting time, staff are asked.
    A target that became CONFIRMED since intake keeps its SKIPPED_INELIGIBLE (the next revision proposes)."""
    if not job.material_change:
        return []
    seen = {d.appointment.ref for d in decided}
    apply = rules.applies(mode)[0]
    out: list[Decision] = []
    for appt in confirmed:
        fitting = appt.ref in seen or fits(appt, a.constraints)
        specs = [] if fitting else _replacement_specs(appt, a.constraints)
        outcome = rules.confirmed_outcome(material=True, fitting=fitting, replacement=bool(specs))
        if outcome is None:
            continue
        proposal = None
        if outcome == Outcome.CONFIRMED_CHANGE_PROPOSED and apply:
            proposal = proposal_open(job=job, appointment=appt, trigger="CONFIRMED_NO_LONGER_FITS", specs=specs,
                                     now=now)
            if proposal is None:  # no time could be held for the patient after all: as if none fitted
                outcome = Outcome.CONFIRMED_NEEDS_STAFF
        out.append(Decision(appt, outcome, applied=apply and proposal is not None, proposal=proposal))
    return out


def _open_proposals(job: ReevaluationJob, a: Assessment, decisions: list[Decision], now) -> None:
    """Applied changes to a PROPOSED or HELD appointment become proposals the patient can accept (the new
    time held for them): a superseded proposal's replacement, or the other fitting times of a HELD that fell
    back. Live proposals about an appointment this run cancelled or changed end SUPERSEDED first."""
    changed = [d for d in decisions if d.applied and d.outcome in CHANGE_OUTCOMES]
    if not changed:
        return
    supersede_live(clinic_id=job.clinic_id, appointment_refs=[d.appointment.ref for d in changed], now=now)
    for d in changed:
        if d.outcome == Outcome.PROPOSAL_SUPERSEDED:
            new = _load_appointment(job, d.replacement_ref)
            spec = {"practitioner": new.practitioner, "treatment": new.treatment, "resource": new.resource}
            d.proposal = proposal_open(job=job, appointment=new, trigger="PROPOSAL_SUPERSEDED", specs=[],
                                       now=now, fixed=[(new.starts_at, spec)])
        elif d.outcome == Outcome.FALLBACK_TO_PROPOSED:
            fresh = _load_appointment(job, d.appointment.ref)
            d.proposal = proposal_open(job=job, appointment=fresh, trigger="FALLBACK_TO_PROPOSED",
                                       specs=_replacement_specs(fresh, a.constraints), now=now)


def _load_appointment(job: ReevaluationJob, ref: str) -> Appointment:
    return Appointment.objects.select_related("clinic", "patient", "practitioner", "treatment", "resource").get(
        clinic_id=job.clinic_id, ref=ref)


def _decide_all(job: ReevaluationJob, assessment: Assessment, mode: str, current: list[Appointment]) -> list[Decision]:
    apply_proposed, apply_held = rules.applies(mode)
    seen = {a.ref for a in current}
    decisions: list[Decision] = []
    # Targets known at intake that are no longer PROPOSED/HELD (confirmed or cancelled since): protected.
    gone = [ref for ref in [*job.held_targets, *job.proposed_targets] if ref not in seen]
    if gone:
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
