"""A worker's round (``work_round``): claim a fair round with its own tokens, fetch every assessment,
then write back together what can be written together, the rest one by one (``worker.write_back``).

Two kinds of job share a transaction: scopes with nothing to decide (``_complete_quiet_batch``), and
scopes whose every PROPOSED/HELD appointment is HELD and is kept or replaced at the same start by the
assessment's first fitting combination, in a clinic that applies HELD outcomes
(``_complete_held_batch``). Each batch does what ``worker.job_complete`` does for one job, a statement
per step for all, and anything it does not cover (a newer head, a lost lease, a slot taken, a policy
that would move back, a CONFIRMED row that would change, a proposal to open) leaves the job to the
one-by-one path, which decides it as it always has.
"""

from __future__ import annotations

import logging
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from common.errors import Conflict, NotFound, PatientOverlap, SlotOccupied, ValidationFailed
from common.models import OutboxMessage
from common.services import new_correlation_id
from reevaluation import decisions as rules
from reevaluation import queries
from reevaluation.assessment import Assessment, AssessmentClient
from reevaluation.jobs.claim import Claim, dispatch_round
from reevaluation.jobs.leases import LeaseKeeper
from reevaluation.jobs.worker import (
    CANCELLED_BY,
    ConfirmedInvariantViolated,
    Decision,
    completion_notice,
    confirmed_digest,
    fetch_assessment,
    outcome_rows,
    write_back,
)
from reevaluation.models import (
    JOB_COMPLETED_TOPIC,
    JobState,
    MutationMode,
    Outcome,
    ReevaluationOutcome,
)
from reevaluation.proposals.services import supersede_live_many
from reevaluation.queries import ELIGIBLE, in_scope, seen
from scheduling.models import (
    Appointment,
    AppointmentStatus,
    CancelReason,
    Practitioner,
    Treatment,
)
from scheduling.services import HeldReplacement, appointments_replace_held

logger = logging.getLogger(__name__)


class BatchAbort(Exception):
    """A clinic's policy would move back: undo the batch and let each job's own write-back decide."""


def _complete_quiet_batch(fetched: list[tuple[Claim, Assessment]], results: dict[str, str]) -> list:
    """Complete, in one transaction, the fetched jobs whose scopes have nothing to decide (what
    ``_complete_quiet`` does for one job, a statement per step for all); returns the pairs left for
    the one-by-one write-back (scopes with appointments, a newer head, a lost lease, a policy
    that would move back, or a clinic whose jobs name different policies)."""
    policies: dict[int, set] = {}
    for claim, a in fetched:
        policies.setdefault(claim.clinic_id, set()).add((a.policy_ref, a.policy_generation))
    quiet = [
        (c, a) for c, a in fetched
        if rules.quiet(targets=bool(c.own_job.held_targets or c.own_job.proposed_targets), in_scope=False)
        and len(policies[c.clinic_id]) == 1
    ]
    if not quiet:
        return fetched
    now = timezone.now()
    try:
        with transaction.atomic():
            busy = set(
                Appointment.objects.filter(
                    in_scope(now),
                    clinic_id__in={c.clinic_id for c, _ in quiet},
                    patient__crm_fingerprint__in={c.own_job.fingerprint for c, _ in quiet},
                ).values_list("clinic_id", "patient__crm_fingerprint")
            )
            quiet = [(c, a) for c, a in quiet
                     if rules.quiet(targets=False, in_scope=(c.clinic_id, c.own_job.fingerprint) in busy)]
            done = complete_many(quiet, now) if quiet else []
            if done:
                modes = policy_advance_many(done)
                settle_many(done)
                OutboxMessage.objects.bulk_create(
                    OutboxMessage(
                        topic=JOB_COMPLETED_TOPIC,
                        correlation_id=new_correlation_id(),
                        **completion_notice(c.own_job, a, modes[c.clinic_id], rules.EMPTY_TALLY.counts, []),
                    )
                    for c, a in done
                )
    except BatchAbort:
        return fetched
    results.update({c.own_job.ref: JobState.COMPLETED for c, _ in done})
    finished = {c.job_id for c, _ in done}
    return [(c, a) for c, a in fetched if c.job_id not in finished]


def complete_many(quiet: list, now, tallies: list[rules.Tally] | None = None) -> list:
    """Complete the (claim, assessment) pairs fenced, with each one's outcomes counted and whether they need staff
    (``decisions.tally``; none: ``EMPTY_TALLY``), unless a newer revision heads its scope; returns the pairs
    completed."""
    tallies = tallies or [rules.EMPTY_TALLY] * len(quiet)
    ids = queries.jobs_complete_many(
        ids=[c.job_id for c, _ in quiet], owners=[c.owner for c, _ in quiet], attempts=[c.attempt for c, _ in quiet],
        refs=[a.policy_ref for _, a in quiet], generations=[a.policy_generation for _, a in quiet],
        counts=[t.counts for t in tallies], needs_staff=[t.needs_staff for t in tallies], now=now,
    )
    return [(c, a) for c, a in quiet if c.job_id in ids]


def policy_advance_many(done: list) -> dict[int, str]:
    """``worker._policy_advance`` for every clinic of the batch at once; returns each clinic's mode."""
    policy = {c.clinic_id: (a.policy_ref, a.policy_generation) for c, a in done}
    modes = queries.policy_advance_many(policies=policy)
    if set(modes) != set(policy):
        raise BatchAbort
    return modes


def settle_many(done: list) -> None:
    """Older needs-staff asks of the completed scopes are settled (see ``worker._finish_completed``)."""
    queries.needs_staff_settle_many(
        clinics=[c.clinic_id for c, _ in done], tenants=[c.own_job.tenant_group_id for c, _ in done],
        fingerprints=[c.own_job.fingerprint for c, _ in done], ids=[c.job_id for c, _ in done],
    )


def work_round(
    *,
    client: AssessmentClient | None = None,
    global_limit: int | None = None,
    per_clinic_limit: int | None = None,
    cursor_name: str = "default",
) -> Counter:
    """Claim one fair round for this process and run every claim inline; counts the results
    (``work_round_states``: each job's).

    For an inline worker next to a fast CRM (the benchmark): the claim is the lease, so there is no
    take-over per job. The assessments are fetched first (no transaction open, no heartbeat: a round
    that outlasts its leases is rescued and run again, never written twice); the jobs whose scopes
    have nothing to decide are then completed together in one transaction of five statements
    (``_complete_quiet_batch``), the jobs whose HELD appointments the assessment keeps or replaces
    together in another (``_complete_held_batch``), the rest one by one as ``job_run`` does. Beat's
    round task runs it in a Celery worker too (``REEVALUATION_WORKER_ROUNDS``): a redelivered task
    message claims a new round, and a round whose process died is rescued when its leases expire.
    """
    return Counter(work_round_states(client=client, global_limit=global_limit, per_clinic_limit=per_clinic_limit,
                                     cursor_name=cursor_name).values())


def work_round_states(
    *,
    client: AssessmentClient | None = None,
    global_limit: int | None = None,
    per_clinic_limit: int | None = None,
    cursor_name: str = "default",
) -> dict[str, str]:
    """``work_round``, answering each claimed job's resulting state by job ref, in claim order."""
    claims = dispatch_round(
        global_limit=global_limit, per_clinic_limit=per_clinic_limit, cursor_name=cursor_name, for_worker=True
    )
    return run_claims(claims, client=client)


def run_claims(claims: list[Claim], *, client: AssessmentClient | None = None, heartbeat: bool = False) -> dict:
    """Run a round this process claimed (``dispatch_round(for_worker=True)``); each job's state by ref. With
    ``heartbeat`` (a Celery worker next to a real CRM) every claimed lease is renewed while the round's
    assessments are fetched."""
    client = client or AssessmentClient()
    results: dict[str, str] = {}
    fetched: list[tuple[Claim, Assessment]] = []
    with LeaseKeeper(*[c.fence for c in claims]) if heartbeat and claims else nullcontext():
        for claim in claims:
            assessment = fetch_assessment(claim.fence, claim.own_job, claim.head_revision, client=client,
                                          heartbeat=False)
            if isinstance(assessment, str):
                results[claim.own_job.ref] = assessment
            else:
                fetched.append((claim, assessment))
    for claim, assessment in _complete_held_batch(_complete_quiet_batch(fetched, results), results):
        results[claim.own_job.ref] = write_back(claim.fence, claim.own_job, assessment)
    return {c.own_job.ref: results[c.own_job.ref] for c in claims}


# --- a round's HELD replacements together ----------------------------------------------------------

HELD_BATCH_MODE = MutationMode.APPLY_PROPOSED_AND_HELD


@dataclass
class _Batched:
    """One job of the batch: its claim and assessment, its scope's HELD appointments decided (``decisions.plan``)."""

    claim: Claim
    assessment: Assessment
    tally: rules.Tally  # the plan's: a batch that cannot carry out every step is undone, so it is the final one
    decisions: list[Decision]
    bookings: list[tuple[Decision, dict]]  # the HOLD_REPLACED ones and the combination to book


def _complete_held_batch(fetched: list[tuple[Claim, Assessment]], results: dict[str, str]) -> list:
    """Complete, in one transaction, the fetched jobs whose scopes hold only HELD appointments that the
    assessment keeps (HOLD_KEPT) or moves to its first fitting practitioner and treatment at the same
    start (HOLD_REPLACED), in clinics that apply HELD outcomes; returns the pairs left for the one-by-one
    write-back. Any refusal undoes the whole batch: each job is then decided alone, as it always was."""
    candidates = _held_candidates(fetched)
    if len(candidates) < 2:
        return fetched
    try:
        with transaction.atomic():
            done = _held_batch(candidates)
    except (BatchAbort, ConfirmedInvariantViolated, Conflict, NotFound, SlotOccupied, PatientOverlap,
            ValidationFailed):
        return fetched
    for batched in done:
        logger.info("reevaluation job=%s completed mode=%s outcomes=%s", batched.claim.own_job.ref, HELD_BATCH_MODE,
                    batched.tally.counts)
    results.update({b.claim.own_job.ref: JobState.COMPLETED for b in done})
    finished = {b.claim.job_id for b in done}
    return [(c, a) for c, a in fetched if c.job_id not in finished]


def _held_candidates(fetched: list[tuple[Claim, Assessment]]) -> list[tuple[Claim, Assessment]]:
    """Jobs whose intake saw HELD appointments only, a material change and no resource to find, one
    policy per clinic (as the quiet batch asks)."""
    policies: dict[int, set] = {}
    for claim, a in fetched:
        policies.setdefault(claim.clinic_id, set()).add((a.policy_ref, a.policy_generation))
    return [
        (c, a) for c, a in fetched
        if c.own_job.held_targets and not c.own_job.proposed_targets and c.own_job.material_change
        and a.constraints.resource_need is None and len(policies[c.clinic_id]) == 1
    ]


def _held_batch(candidates: list[tuple[Claim, Assessment]]) -> list[_Batched]:
    now = timezone.now()
    scopes = sorted({(c.clinic_id, c.own_job.fingerprint) for c, _ in candidates})
    confirmed_before = confirmed_digest(scopes)
    rows = _scope_rows(scopes)
    catalogues = _Catalogues({c.clinic_id for c, _ in candidates},
                             {a.constraints.required_practitioner for _, a in candidates})
    batch = []
    for claim, assessment in candidates:
        batched = _decide(claim, assessment, rows.get((claim.clinic_id, claim.own_job.fingerprint), []), catalogues)
        if batched is not None:
            batch.append(batched)
    batch = _locked(batch)
    if len(batch) < 2:
        raise BatchAbort
    modes = policy_advance_many([(b.claim, b.assessment) for b in batch])
    batch = [b for b in batch if modes[b.claim.clinic_id] == HELD_BATCH_MODE]
    if len(batch) < 2:
        raise BatchAbort
    _apply(batch, now)
    if confirmed_digest(scopes) != confirmed_before:
        raise ConfirmedInvariantViolated("held batch")
    ReevaluationOutcome.objects.bulk_create(
        [row for b in batch for row in outcome_rows(b.claim.own_job, HELD_BATCH_MODE, b.decisions)]
    )
    pairs = [(b.claim, b.assessment) for b in batch]
    if len(complete_many(pairs, now, [b.tally for b in batch])) != len(batch):
        raise BatchAbort  # cannot happen while we hold the job rows: refuse rather than guess
    settle_many(pairs)
    OutboxMessage.objects.bulk_create(
        OutboxMessage(
            topic=JOB_COMPLETED_TOPIC,
            correlation_id=new_correlation_id(),
            **completion_notice(b.claim.own_job, b.assessment, HELD_BATCH_MODE, b.tally.counts, b.decisions),
        )
        for b in batch
    )
    return batch


def _scope_rows(scopes: list[tuple[int, str]]) -> dict[tuple[int, str], list[Appointment]]:
    """The scopes' appointments as one job reads its own (``queries.in_scope``), in one SELECT, by scope."""
    by_scope: dict[tuple[int, str], list[Appointment]] = {scope: [] for scope in scopes}
    for appt in (
        Appointment.objects.select_related("patient", "practitioner", "treatment", "resource")
        .filter(in_scope(timezone.now()), clinic_id__in={c for c, _ in scopes},
                patient__crm_fingerprint__in={f for _, f in scopes})
        .order_by("pk")
    ):
        if (appt.clinic_id, appt.patient.crm_fingerprint) in by_scope:
            by_scope[(appt.clinic_id, appt.patient.crm_fingerprint)].append(appt)
    return by_scope


class _Catalogues:
    """The batch's clinics' active practitioners named by the assessments, and their treatments, read once: what
    ``queries.job_facts`` hands ``plan`` for one job (no resources: the batch takes no job whose assessment needs
    one)."""

    def __init__(self, clinics: set[int], practitioner_refs: set):
        refs = {r for r in practitioner_refs if r is not None}
        self.practitioners = {
            (p.clinic_id, p.ref): p
            for p in Practitioner.objects.filter(clinic_id__in=clinics, ref__in=refs, active=True)
        } if refs else {}
        self.treatments: dict[int, list[Treatment]] = {}
        for t in Treatment.objects.filter(clinic_id__in=clinics).order_by("pk"):
            self.treatments.setdefault(t.clinic_id, []).append(t)

    def of(self, clinic_id: int, c) -> rules.Catalogue:
        named = self.practitioners.get((clinic_id, c.required_practitioner))
        return rules.Catalogue(() if named is None else (named,), self.treatments.get(clinic_id, []), ())


def _decide(claim: Claim, a: Assessment, rows: list[Appointment], catalogues: _Catalogues) -> _Batched | None:
    """The job's plan (``decisions.plan``, as the one-by-one write-back asks it) when the batch can carry it out: its
    HELD appointments kept or replaced; None when the job needs the one-by-one path (an intake target gone, a
    PROPOSED appointment, a future CONFIRMED one that no longer fits, a HELD one with no fitting combination)."""
    current = [seen(r) for r in rows if r.status in ELIGIBLE]
    if set(claim.own_job.held_targets) - {s.ref for s in current}:
        return None  # a target gone: the one-by-one path reads it
    plan = rules.plan(
        material=claim.own_job.material_change, constraints=a.constraints, current=current, gone=[],
        confirmed=[seen(r) for r in rows if r.status == AppointmentStatus.CONFIRMED],
        catalogue=catalogues.of(claim.clinic_id, a.constraints),
    )
    if any(step.outcome not in (Outcome.HOLD_KEPT, Outcome.HOLD_REPLACED) for step in plan.steps):
        return None  # a proposal to open, staff to ask or a fallback: the one-by-one path's work
    batched = _Batched(claim, a, plan.tally, [], [])
    for step in plan.steps:
        decision = Decision(step.row, step.outcome, applied=step.outcome == Outcome.HOLD_REPLACED)
        batched.decisions.append(decision)
        if decision.applied:
            batched.bookings.append((decision, step.specs[0]))  # no resource to find: the one combination
    return batched


def _locked(batch: list[_Batched]) -> list[_Batched]:
    """Lock the scopes' heads, then the jobs (the order intake and ``job_complete`` take): the jobs whose fence
    holds and whose revision still heads its scope (the rest go one by one: STALE or LEASE_LOST)."""
    heads = queries.heads_lock_many(
        clinics=[b.claim.clinic_id for b in batch], tenants=[b.claim.own_job.tenant_group_id for b in batch],
        fingerprints=[b.claim.own_job.fingerprint for b in batch],
    )
    held = queries.jobs_lock_running(
        ids=[b.claim.job_id for b in batch], owners=[b.claim.owner for b in batch],
        attempts=[b.claim.attempt for b in batch],
    )
    return [
        b for b in batch
        if b.claim.job_id in held
        and heads.get((b.claim.clinic_id, b.claim.own_job.tenant_group_id, b.claim.own_job.fingerprint), 0)
        <= b.claim.own_job.revision
    ]


def _apply(batch: list[_Batched], now) -> None:
    """Cancel and rebook every replaced HOLD in one scheduling command, then end the live proposals about
    the cancelled appointments (``worker._open_proposals`` for HOLD_REPLACED)."""
    bookings = [booking for b in batch for booking in b.bookings]
    booked = appointments_replace_held(replacements=[
        HeldReplacement(
            appointment=d.appointment, practitioner=spec["practitioner"], treatment=spec["treatment"],
            resource=spec["resource"], reason="reevaluation:hold_replaced", reason_code=CancelReason.RESCHEDULED,
            cancelled_by=CANCELLED_BY,
        )
        for d, spec in bookings
    ])
    for (d, _), new in zip(bookings, booked, strict=True):
        d.replacement = new
    refs_by_clinic: dict[int, list[str]] = {}
    for d, _ in bookings:
        refs_by_clinic.setdefault(d.appointment.clinic_id, []).append(d.appointment.ref)
    supersede_live_many(refs_by_clinic=refs_by_clinic, now=now)
