"""The fair dispatcher: a global and a per-clinic limit per round, resuming after the last clinic served.

Cost per round grows with the number of clinics served, not with the backlog:
1. pick up to ``global_limit`` clinics with claimable work, in id order after the cursor (wrapping),
   each by an index probe (EXISTS over ``rjob_claim``);
2. in one statement, claim up to ``per_clinic_limit`` PENDING jobs per picked clinic with a
   ``LATERAL`` subquery ordered by (priority, due_at, id) over the same partial index, ``FOR NO KEY
   UPDATE SKIP LOCKED``, keep the first ``global_limit`` rows in clinic order and move them to
   RUNNING with a fresh lease (``UPDATE … FROM`` the claim ``RETURNING`` what the caller needs);
3. set the cursor to the last clinic actually served.

A worker that runs the claimed jobs itself (``worker.work_round``) claims with its own owner tokens
and takes what it needs to run each job from the same ``UPDATE … RETURNING`` (the job's columns,
the scope head's revision, the clinic and tenant refs): no lease take-over, no re-read per job.

The cursor row is locked for the round, so rounds (and cursor writes) are serialized: a duplicate
beat tick waits, then sees the first round's claims as RUNNING and claims only what is left.

Bound: with ``N`` clinics holding claimable work, a round serves at least
``K = global_limit // per_clinic_limit`` clinics, taken round-robin after the cursor, so every such
clinic is served within ``ceil(N / K)`` rounds, however large any one clinic's backlog is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings as dj_settings
from django.db import connection, transaction
from django.utils import timezone

from common.cas import transition_sources
from reevaluation.jobs.leases import Fence
from reevaluation.models import DispatchCursor, DrainState, JobState, MutationMode, ReevaluationJob

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


@dataclass(frozen=True)
class Claim:
    job_id: int
    job_ref: str
    clinic_id: int
    owner: str
    attempt: int
    #: Only for a worker's own claim: the RUNNING job as claimed (clinic and tenant refs attached as
    #: ``clinic_ref``/``tenant_group_ref``) and its scope head's revision.
    job: ReevaluationJob | None = None
    head_revision: int | None = None

    @property
    def own_job(self) -> ReevaluationJob:
        """The job of a worker's own claim; a plain claim has none (its runner loads the job)."""
        if self.job is None:
            raise LookupError(f"claim of {self.job_ref} carries no job (not a worker's own claim)")
        return self.job

    @property
    def fence(self) -> Fence:
        return Fence(self.job_id, self.owner, self.attempt)


def _pick_clinics(cursor, after: int, limit: int) -> list[int]:
    params = {
        "cursor": after,
        "active": DrainState.ACTIVE,
        "disabled": MutationMode.DISABLED,
        "pending": JobState.PENDING,
        "limit": limit,
    }
    cursor.execute(_CLINICS_SQL.format(op=">"), params)
    picked = [row[0] for row in cursor.fetchall()]
    if len(picked) < limit:
        # Wrap around: clinics up to and including the cursor's come after the ones past it.
        cursor.execute(_CLINICS_SQL.format(op="<="), {**params, "limit": limit - len(picked)})
        picked += [row[0] for row in cursor.fetchall() if row[0] not in picked]
    return picked


def dispatch_round(
    *,
    global_limit: int | None = None,
    per_clinic_limit: int | None = None,
    now: datetime | None = None,
    cursor_name: str = "default",
    for_worker: bool = False,
) -> list[Claim]:
    """Claim one fair round of jobs and return them (each with its own lease owner token).

    The caller hands each claim to a worker (a Celery task queued on commit), or, with
    ``for_worker``, runs them itself: the tokens are then the worker's own (the lease is taken here,
    not swapped later) and each claim carries its job. A claim whose message is lost simply expires
    and is rescued.
    """
    global_limit = global_limit or dj_settings.REEVALUATION_DISPATCH_GLOBAL_LIMIT
    per_clinic_limit = per_clinic_limit or dj_settings.REEVALUATION_DISPATCH_PER_CLINIC_LIMIT
    now = now or timezone.now()
    with transaction.atomic():
        locked = DispatchCursor.objects.select_for_update(no_key=True).filter(name=cursor_name)
        state = locked.first()
        if state is None:
            DispatchCursor.objects.get_or_create(name=cursor_name)
            state = locked.get()
        with connection.cursor() as cursor:
            clinics = _pick_clinics(cursor, state.last_clinic_id, global_limit)
            if not clinics:
                return []
            cursor.execute(
                _CLAIM_SQL.format(more=_RUN_SQL if for_worker else ""),
                {
                    "clinics": clinics,
                    "pending": JobState.PENDING,
                    "per_clinic": per_clinic_limit,
                    "global_limit": global_limit,
                    "running": JobState.RUNNING,
                    "sources": transition_sources(ReevaluationJob, JobState.RUNNING, [JobState.PENDING]),
                    "prefix": "worker:" if for_worker else "dispatch:",
                    "expires": now + timedelta(seconds=dj_settings.REEVALUATION_LEASE_SECONDS),
                    "renewed": now if for_worker else None,
                    "now": now,
                },
            )
            rows = sorted(cursor.fetchall(), key=lambda row: row[:4])  # clinic order, then the claim order
        if rows:
            DispatchCursor.objects.filter(pk=state.pk).update(
                last_clinic_id=rows[-1][5], rounds=state.rounds + 1, updated_at=now  # the last claim's clinic
            )
    # Built after the commit: the cursor row (which serializes every dispatcher's round) is held only
    # for the statements, not for turning a worker's rows into jobs.
    return [_claim(row[3:], now) if for_worker else Claim(*row[3:8]) for row in rows]


def _claim(row: tuple, now: datetime) -> Claim:
    """A worker's own claim with its RUNNING job built from the RETURNING row (no re-read)."""
    job_id, ref, clinic_id, owner, attempt = row[:5]
    n = len(JOB_COLUMNS)
    fields = dict(zip(JOB_COLUMNS, row[5 : 5 + n], strict=True))
    for name in ("held_targets", "proposed_targets"):  # jsonb arrives as text through Django's cursor
        if isinstance(fields[name], str):
            fields[name] = json.loads(fields[name])
    job = ReevaluationJob(
        pk=job_id, ref=ref, clinic_id=clinic_id, state=JobState.RUNNING, lease_owner=owner, attempts=attempt,
        **fields,
    )
    job.clinic_ref, job.tenant_group_ref = row[6 + n], row[7 + n]
    return Claim(job_id, ref, clinic_id, owner, attempt, job=job, head_revision=row[5 + n])
