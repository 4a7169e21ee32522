"""Reevaluation's query module: every statement the app runs outside the ORM, one typed function each.

States are bound from the enums (``JobState``, ``DrainState``, ``MutationMode``) and a move's source states from
``JOB_TRANSITIONS`` (``common.cas.transition_sources``): no state name is written in SQL text. The callers are the
commands of ``jobs/``, ``rounds/`` and ``intake/``, which own the transactions these run in. Why each is raw, and
the benchmark that keeps it (docs/benchmarks.md, section 4 "Reevaluation" unless named otherwise):

* ``clinics_with_work``: one index probe per clinic (``EXISTS`` over ``rjob_claim``) in id order after the cursor;
  ``bench/reevaluation.py`` (fairness, the dispatch round 6.8 ms) and ``bench/clinics.py`` (section 7: the round's
  cost at 10 to 1,000 clinics).
* ``jobs_claim``: the fair claim in one statement (a ``LATERAL`` walk per clinic, ``FOR NO KEY UPDATE SKIP LOCKED``,
  ``UPDATE … FROM`` ``RETURNING`` the job and its head, so a worker re-reads nothing); the ORM has no ``LATERAL``
  nor ``UPDATE … RETURNING``; ``bench/reevaluation.py`` (throughput, 2,007 quiet jobs/s).
* ``policy_advance``, ``policy_advance_many``: the clinic's policy moved forward only, and its mutation mode read
  from the locked row, in one conditional ``UPDATE … RETURNING`` (one clinic, or a round's clinics locked in clinic
  order); ``bench/reevaluation.py`` (five statements a quiet job) and ``bench/reevaluation_profile.py`` (the held
  batch: the policy advance 0.03 ms a job).
* ``jobs_complete_many``, ``needs_staff_settle_many``, ``heads_lock_many``, ``jobs_lock_running``: a round's jobs
  completed, settled and locked together, fenced row by row through ``unnest`` of the round's arrays (the ORM writes
  one value for all rows or one statement a row); ``bench/reevaluation_profile.py`` (about 20 statements a round of
  50 held jobs where one by one took 31 a job).
* ``quarantine_tally_count``: an upsert that counts and answers the count (``ON CONFLICT DO UPDATE … RETURNING``, no
  ORM form: ``update_or_create`` is two statements and a race); one statement a refusal under a junk storm
  (``tests/reevaluation/test_intake_junk.py``).

One read is here with them though it is the ORM's: ``job_facts``, everything a job's write-back reads before it
decides (``jobs/worker.py``), in the order it is read and locked, ending at the first fact that ends the run; it
asks ``policy_accept`` (the one-by-one policy advance) under the job's lock. Its ORM pieces live beside it because
other readers build the same filters: ``job_scope`` (a job's scope as filter arguments), ``in_scope`` (what a job
reads of its scope: the PROPOSED/HELD appointments and the CONFIRMED ones still ahead) and ``seen`` (an appointment
as the decisions see it), shared with the rounds' batched read; ``fence_guard`` (a job row still under this
lease) and ``fenced_job`` (the job's row while its lease holds), shared with ``jobs/leases.py`` and the worker's
failure paths.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import Q

from common.cas import transition_sources
from reevaluation import decisions as rules
from reevaluation.models import (
    ClinicReevaluationSettings,
    DrainState,
    JobState,
    MutationMode,
    QuarantineTally,
    ReevaluationHead,
    ReevaluationJob,
)
from scheduling.models import Appointment, AppointmentStatus, Practitioner, Resource, Treatment

if TYPE_CHECKING:
    from reevaluation.assessment import Assessment
    from reevaluation.jobs.leases import Fence

# --- the fair claim (jobs/claim.py) -----------------------------------------------------------------------------

_CLINICS_SQL = """
SELECT s.clinic_id FROM reevaluation_clinicreevaluationsettings s
WHERE s.clinic_id {op} %(cursor)s
  AND s.drain_state = %(active)s AND s.mutation_mode <> %(disabled)s
  AND EXISTS (
    SELECT 1 FROM reevaluation_reevaluationjob j WHERE j.clinic_id = s.clinic_id AND j.state = %(pending)s
  )
ORDER BY s.clinic_id
LIMIT %(limit)s
"""


def clinics_with_work(*, after: int, limit: int, wrapped: bool = False) -> list[int]:
    """Up to ``limit`` active, enabled clinics with a PENDING job, in id order after ``after`` (``wrapped``: up to
    and including it)."""
    params: dict[str, Any] = {
        "cursor": after,
        "active": DrainState.ACTIVE,
        "disabled": MutationMode.DISABLED,
        "pending": JobState.PENDING,
        "limit": limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(_CLINICS_SQL.format(op="<=" if wrapped else ">"), params)
        return [row[0] for row in cursor.fetchall()]


# Claim and take in one statement: the LATERAL walk locks up to ``per_clinic`` PENDING jobs per picked
# clinic (SKIP LOCKED), the first ``global_limit`` in clinic order go RUNNING under fresh owner tokens.
_CLAIM_SQL = """
WITH picked AS (
    SELECT c.ord, j.id, j.priority, j.due_at
    FROM unnest(%(clinics)s::bigint[]) WITH ORDINALITY AS c(clinic_id, ord)
    CROSS JOIN LATERAL (
        SELECT id, priority, due_at FROM reevaluation_reevaluationjob
        WHERE clinic_id = c.clinic_id AND state = %(pending)s
        ORDER BY priority, due_at, id
        LIMIT %(per_clinic)s
        FOR NO KEY UPDATE SKIP LOCKED
    ) j
    ORDER BY c.ord, j.priority, j.due_at, j.id
    LIMIT %(global_limit)s
)
UPDATE reevaluation_reevaluationjob AS j
SET state = %(running)s, attempts = j.attempts + 1,
    lease_owner = %(prefix)s || replace(gen_random_uuid()::text, '-', ''),
    lease_expires_at = %(expires)s, lease_renewed_at = %(renewed)s, next_attempt_at = NULL,
    first_claimed_at = COALESCE(j.first_claimed_at, %(now)s), version = j.version + 1, updated_at = %(now)s
FROM picked
WHERE j.id = picked.id AND j.state = ANY(%(sources)s)
RETURNING picked.ord, picked.priority, picked.due_at, j.id, j.ref, j.clinic_id, j.lease_owner, j.attempts{more}
"""

#: What a worker running the claim itself needs, in the claim's own RETURNING (no re-read per job).
JOB_COLUMNS = (
    "tenant_group_id", "fingerprint", "revision", "event_id", "assessment_ref", "assessment_hash",
    "material_change", "held_targets", "proposed_targets", "max_attempts", "cooldown_seconds", "version",
)
_RUN_SQL = "".join(f", j.{c}" for c in JOB_COLUMNS) + """,
    (SELECT h.revision FROM reevaluation_reevaluationhead h
     WHERE h.clinic_id = j.clinic_id AND h.tenant_group_id = j.tenant_group_id AND h.fingerprint = j.fingerprint),
    (SELECT c.ref FROM scheduling_clinic c WHERE c.id = j.clinic_id),
    (SELECT t.ref FROM scheduling_tenantgroup t WHERE t.id = j.tenant_group_id)"""


def jobs_claim(
    *, clinics: list[int], per_clinic: int, global_limit: int, prefix: str, expires: datetime,
    renewed: datetime | None, now: datetime, with_run: bool,
) -> list[tuple]:
    """Claim up to ``per_clinic`` PENDING jobs of each clinic (``global_limit`` in all) RUNNING under fresh owner
    tokens (``prefix`` + a uuid); rows sorted in clinic order, then claim order: (ord, priority, due_at, id, ref,
    clinic_id, lease_owner, attempts[, ``JOB_COLUMNS``…, head revision, clinic ref, tenant group ref])."""
    with connection.cursor() as cursor:
        cursor.execute(
            _CLAIM_SQL.format(more=_RUN_SQL if with_run else ""),
            {
                "clinics": clinics,
                "pending": JobState.PENDING,
                "per_clinic": per_clinic,
                "global_limit": global_limit,
                "running": JobState.RUNNING,
                "sources": transition_sources(ReevaluationJob, JobState.RUNNING, [JobState.PENDING]),
                "prefix": prefix,
                "expires": expires,
                "renewed": renewed,
                "now": now,
            },
        )
        return sorted(cursor.fetchall(), key=lambda row: row[:4])


# --- the policy advance (jobs/worker.py one by one, rounds/services.py for a round) -------------------------------

#: The one rule of the advance, in both statements: the assessment's policy is accepted at or past the clinic's
#: current generation; at the same generation only under the same ref.
_ACCEPTS = """(s.policy_generation IS NULL OR s.policy_generation < v.gen
       OR (s.policy_generation = v.gen AND s.policy_ref = v.ref))"""

_POLICY_SQL = f"""
UPDATE reevaluation_clinicreevaluationsettings AS s
SET policy_ref = v.ref, policy_generation = v.gen, consecutive_assessment_failures = 0
FROM (SELECT %(ref)s::text AS ref, %(gen)s::bigint AS gen) AS v
WHERE s.clinic_id = %(clinic)s
  AND {_ACCEPTS}
RETURNING s.mutation_mode
"""

# The settings rows are locked in clinic order (two workers' batches never wait on each other in a cycle).
_POLICY_MANY_SQL = f"""
WITH locked AS (
    SELECT id FROM reevaluation_clinicreevaluationsettings WHERE clinic_id = ANY(%(clinics)s)
    ORDER BY clinic_id FOR NO KEY UPDATE)
UPDATE reevaluation_clinicreevaluationsettings AS s
SET policy_ref = v.ref, policy_generation = v.gen, consecutive_assessment_failures = 0
FROM unnest(%(clinics)s::bigint[], %(refs)s::text[], %(gens)s::bigint[]) AS v(clinic_id, ref, gen), locked
WHERE s.id = locked.id AND s.clinic_id = v.clinic_id
  AND {_ACCEPTS}
RETURNING s.clinic_id, s.mutation_mode
"""


def policy_advance(*, clinic_id: int, ref: str, generation: int) -> str | None:
    """Advance the clinic's policy to (``ref``, ``generation``) and reset its failure streak; the clinic's mutation
    mode, or None when refused (the policy would move back, or the clinic has no settings row yet)."""
    with connection.cursor() as cursor:
        cursor.execute(_POLICY_SQL, {"ref": ref, "gen": generation, "clinic": clinic_id})
        row = cursor.fetchone()
    return None if row is None else (row[0] or MutationMode.DISABLED)


def policy_accept(job: ReevaluationJob, *, ref: str, generation: int) -> str | None:
    """``policy_advance`` for the job's clinic, and on the clinic's first use (no settings row yet: made with the
    default mode) once more; the clinic's mutation mode, or None when the policy would move back."""
    mode = policy_advance(clinic_id=job.clinic_id, ref=ref, generation=generation)
    if mode is None and not ClinicReevaluationSettings.objects.filter(clinic_id=job.clinic_id).exists():
        from reevaluation.modes.services import settings_for  # the first use only

        settings_for(job.clinic)
        mode = policy_advance(clinic_id=job.clinic_id, ref=ref, generation=generation)
    return mode


def policy_advance_many(*, policies: dict[int, tuple[str, int]]) -> dict[int, str]:
    """``policy_advance`` for many clinics (clinic id → (ref, generation)) in one statement; each accepted clinic's
    mode (a refused clinic is missing)."""
    clinics = sorted(policies)
    with connection.cursor() as cursor:
        cursor.execute(_POLICY_MANY_SQL, {
            "clinics": clinics,
            "refs": [policies[k][0] for k in clinics],
            "gens": [policies[k][1] for k in clinics],
        })
        return {clinic: mode or MutationMode.DISABLED for clinic, mode in cursor.fetchall()}


# --- a round's jobs together (rounds/services.py) ----------------------------------------------------------------

_COMPLETE_MANY_SQL = """
UPDATE reevaluation_reevaluationjob AS j
SET state = %(completed)s, outcome_counts = v.counts::jsonb, needs_staff = v.staff, target_policy_ref = v.ref,
    target_policy_generation = v.gen, last_failure_code = '', lease_owner = '', lease_expires_at = NULL,
    finished_at = %(now)s, version = j.version + 1, updated_at = %(now)s
FROM unnest(%(ids)s::bigint[], %(owners)s::text[], %(attempts)s::int[], %(refs)s::text[], %(gens)s::bigint[],
            %(counts)s::text[], %(staff)s::bool[])
    AS v(id, owner, attempt, ref, gen, counts, staff)
WHERE j.id = v.id AND j.state = ANY(%(sources)s) AND j.lease_owner = v.owner AND j.attempts = v.attempt
  AND NOT EXISTS (
    SELECT 1 FROM reevaluation_reevaluationhead h
    WHERE h.clinic_id = j.clinic_id AND h.tenant_group_id = j.tenant_group_id AND h.fingerprint = j.fingerprint
      AND h.revision > j.revision)
RETURNING j.id
"""


def jobs_complete_many(
    *, ids: Sequence[int], owners: Sequence[str], attempts: Sequence[int], refs: Sequence[str],
    generations: Sequence[int], counts: Sequence[dict], needs_staff: Sequence[bool], now: datetime,
) -> set[int]:
    """Complete RUNNING jobs fenced on (owner, attempt), each with its outcome counts, whether it needs staff and its
    target policy, unless a newer revision heads its scope; the ids completed."""
    with connection.cursor() as cursor:
        cursor.execute(_COMPLETE_MANY_SQL, {
            "completed": JobState.COMPLETED,
            "sources": transition_sources(ReevaluationJob, JobState.COMPLETED, [JobState.RUNNING]),
            "now": now,
            "ids": list(ids),
            "owners": list(owners),
            "attempts": list(attempts),
            "refs": list(refs),
            "gens": list(generations),
            "counts": [json.dumps(c, sort_keys=True) for c in counts],
            "staff": list(needs_staff),
        })
        return {row[0] for row in cursor.fetchall()}


_SETTLE_MANY_SQL = """
UPDATE reevaluation_reevaluationjob AS j SET needs_staff = false, version = j.version + 1
FROM unnest(%(clinics)s::bigint[], %(tenants)s::bigint[], %(fps)s::text[]) AS v(clinic_id, tenant_group_id, fp)
WHERE j.needs_staff AND j.clinic_id = v.clinic_id AND j.tenant_group_id = v.tenant_group_id
  AND j.fingerprint = v.fp AND NOT (j.id = ANY(%(ids)s))
"""


def needs_staff_settle_many(
    *, clinics: Sequence[int], tenants: Sequence[int], fingerprints: Sequence[str], ids: Sequence[int]
) -> None:
    """The older needs-staff asks of the scopes (clinic, tenant group, fingerprint) settled, but the jobs ``ids``."""
    with connection.cursor() as cursor:
        cursor.execute(_SETTLE_MANY_SQL, {
            "clinics": list(clinics), "tenants": list(tenants), "fps": list(fingerprints), "ids": list(ids),
        })


_LOCK_HEADS_SQL = """
SELECT h.clinic_id, h.tenant_group_id, h.fingerprint, h.revision FROM reevaluation_reevaluationhead AS h
JOIN unnest(%(clinics)s::bigint[], %(tenants)s::bigint[], %(fps)s::text[]) AS v(clinic_id, tenant_group_id, fp)
  ON h.clinic_id = v.clinic_id AND h.tenant_group_id = v.tenant_group_id AND h.fingerprint = v.fp
ORDER BY h.id FOR NO KEY UPDATE OF h
"""


def heads_lock_many(
    *, clinics: Sequence[int], tenants: Sequence[int], fingerprints: Sequence[str]
) -> dict[tuple[int, int, str], int]:
    """Lock the scopes' heads in id order; each scope's (clinic, tenant group, fingerprint) revision."""
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_HEADS_SQL, {"clinics": list(clinics), "tenants": list(tenants), "fps": list(fingerprints)})
        return {(c, t, f): revision for c, t, f, revision in cursor.fetchall()}


_LOCK_JOBS_SQL = """
SELECT j.id FROM reevaluation_reevaluationjob AS j
JOIN unnest(%(ids)s::bigint[], %(owners)s::text[], %(attempts)s::int[]) AS v(id, owner, attempt)
  ON j.id = v.id AND j.lease_owner = v.owner AND j.attempts = v.attempt
WHERE j.state = %(running)s
ORDER BY j.id FOR NO KEY UPDATE OF j
"""


def jobs_lock_running(*, ids: Sequence[int], owners: Sequence[str], attempts: Sequence[int]) -> set[int]:
    """Lock, in id order, the RUNNING jobs whose fence (owner, attempt) still holds; their ids."""
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_JOBS_SQL, {
            "ids": list(ids), "owners": list(owners), "attempts": list(attempts), "running": JobState.RUNNING,
        })
        return {row[0] for row in cursor.fetchall()}


# --- intake (intake/services.py) ---------------------------------------------------------------------------------

_TALLY_SQL = f"""
INSERT INTO {QuarantineTally._meta.db_table} AS t (source, window_start, refused, stored)
VALUES (%s, %s, 1, 0)
ON CONFLICT (source, window_start) DO UPDATE SET refused = t.refused + 1
RETURNING refused
"""


def quarantine_tally_count(*, source: str, window: datetime) -> int:
    """Count one refusal of ``source`` in the minute ``window``; the minute's count so far."""
    with connection.cursor() as cursor:
        cursor.execute(_TALLY_SQL, [source, window])
        return cursor.fetchone()[0]


# --- what one job's write-back reads (jobs/worker.py) -------------------------------------------------------------

#: The appointments a job may change: PROPOSED and HELD.
ELIGIBLE = (AppointmentStatus.PROPOSED, AppointmentStatus.HELD)


def fence_guard(fence: Fence) -> Q:
    """The filter a job row matches only while ``fence`` still holds its lease (with ``state`` RUNNING)."""
    return Q(lease_owner=fence.owner, attempts=fence.attempt)


def fenced_job(fence: Fence):
    """The queryset matching the job only while ``fence`` still holds its lease (reads and row locks)."""
    return ReevaluationJob.objects.filter(fence_guard(fence), pk=fence.job_id, state=JobState.RUNNING)


def in_scope(now) -> Q:
    """What a job reads of its scope: the PROPOSED/HELD appointments, and the CONFIRMED ones still ahead."""
    return Q(status__in=ELIGIBLE) | Q(status=AppointmentStatus.CONFIRMED, starts_at__gt=now)


def seen(appt: Appointment) -> rules.Seen:
    """An appointment row (read with its practitioner, treatment and resource) in the decisions' terms."""
    slot = rules.Slot(practitioner_ref=appt.practitioner.ref, treatment_ref=appt.treatment.ref,
                      minutes=(appt.ends_at - appt.starts_at).total_seconds() / 60,
                      resource_kind=appt.resource.kind if appt.resource is not None else None)
    return rules.Seen(row=appt, ref=appt.ref, held=appt.status == AppointmentStatus.HELD, slot=slot,
                      practitioner=appt.practitioner, treatment_id=appt.treatment_id, resource=appt.resource)


def job_scope(job: ReevaluationJob) -> dict:
    """A job's scope (clinic, tenant group, patient fingerprint) as filter arguments."""
    return {"clinic_id": job.clinic_id, "tenant_group_id": job.tenant_group_id, "fingerprint": job.fingerprint}


@dataclass(frozen=True)
class JobFacts:
    """What a job's write-back reads before it decides. ``guard`` is the job's fence as a filter (its completion's),
    ``scope`` its scope as filter arguments (``job_scope``).
    ``locked``: the head and the job are locked (a scope with something in it); then ``ended`` is the run's end when
    the fence no longer holds (LEASE_LOST) or a newer revision heads the scope (STALE), else ``mode`` is the clinic's
    mutation mode once the policy advanced (None: it would move back)."""

    guard: Q
    scope: dict
    targets: tuple[str, ...]
    current: list[rules.Seen]
    confirmed: list[rules.Seen]
    locked: bool = False
    ended: str = ""
    mode: str | None = None
    gone: list[Appointment] | None = None
    catalogue: rules.Catalogue | None = None


def job_facts(fence: Fence, job: ReevaluationJob, assessment: Assessment, now) -> JobFacts:
    """Read a job's scope for its write-back, in its transaction: the PROPOSED/HELD appointments and the future
    CONFIRMED ones in one SELECT; with none and no intake target (``decisions.quiet``: nothing to decide) nothing
    more, no lock. Otherwise lock the head, then the job (the order intake takes), advance the policy
    (``policy_accept``: the clinic's mode, read from its locked row), read the intake targets gone since (one SELECT,
    only when there are some) and hand what a replacement may take as querysets (``decisions.Catalogue``: read by
    ``plan`` only when it seeks a replacement)."""
    rows = list(
        Appointment.objects.select_related("clinic", "patient", "practitioner", "treatment", "resource")
        .filter(in_scope(now), clinic_id=job.clinic_id, patient__crm_fingerprint=job.fingerprint)
        .order_by("pk")
    )
    guard, scope, targets = fence_guard(fence), job_scope(job), (*job.held_targets, *job.proposed_targets)
    current = [seen(a) for a in rows if a.status in ELIGIBLE]
    confirmed = [seen(a) for a in rows if a.status == AppointmentStatus.CONFIRMED]
    if not targets and not rows:  # quiet: nothing to lock
        return JobFacts(guard, scope, targets, current, confirmed)
    head = ReevaluationHead.objects.select_for_update(no_key=True).filter(**scope).first()
    if fenced_job(fence).select_for_update(no_key=True).first() is None:
        return JobFacts(guard, scope, targets, current, confirmed, locked=True, ended="LEASE_LOST")
    if head is not None and job.revision < head.revision:
        return JobFacts(guard, scope, targets, current, confirmed, locked=True, ended=JobState.STALE)
    mode = policy_accept(job, ref=assessment.policy_ref, generation=assessment.policy_generation)
    if mode is None:
        return JobFacts(guard, scope, targets, current, confirmed, locked=True)
    refs = {s.ref for s in current}
    missing = [ref for ref in targets if ref not in refs]
    gone = list(Appointment.objects.filter(clinic_id=job.clinic_id, ref__in=missing).order_by("pk")) if missing else []
    c = assessment.constraints
    catalogue = rules.Catalogue(
        Practitioner.objects.filter(clinic_id=job.clinic_id, ref=c.required_practitioner, active=True)
        .order_by("pk")[:1] if c.required_practitioner is not None else (),
        Treatment.objects.filter(clinic_id=job.clinic_id).order_by("pk"),
        Resource.objects.filter(clinic_id=job.clinic_id, kind=c.resource_need).order_by("pk")[:10]
        if c.resource_need is not None else (),
    )
    return JobFacts(guard, scope, targets, current, confirmed, locked=True, mode=mode, gone=gone, catalogue=catalogue)
