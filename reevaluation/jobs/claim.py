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
from django.db import transaction
from django.utils import timezone

from reevaluation import queries
from reevaluation.jobs.leases import Fence
from reevaluation.models import DispatchCursor, JobState, ReevaluationJob


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


def _pick_clinics(after: int, limit: int) -> list[int]:
    picked = queries.clinics_with_work(after=after, limit=limit)
    if len(picked) < limit:
        # Wrap around: clinics up to and including the cursor's come after the ones past it.
        picked += [c for c in queries.clinics_with_work(after=after, limit=limit - len(picked), wrapped=True)
                   if c not in picked]
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
        clinics = _pick_clinics(state.last_clinic_id, global_limit)
        if not clinics:
            return []
        rows = queries.jobs_claim(  # clinic order, then the claim order
            clinics=clinics, per_clinic=per_clinic_limit, global_limit=global_limit,
            prefix="worker:" if for_worker else "dispatch:",
            expires=now + timedelta(seconds=dj_settings.REEVALUATION_LEASE_SECONDS),
            renewed=now if for_worker else None, now=now, with_run=for_worker,
        )
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
    n = len(queries.JOB_COLUMNS)
    fields = dict(zip(queries.JOB_COLUMNS, row[5 : 5 + n], strict=True))
    for name in ("held_targets", "proposed_targets"):  # jsonb arrives as text through Django's cursor
        if isinstance(fields[name], str):
            fields[name] = json.loads(fields[name])
    job = ReevaluationJob(
        pk=job_id, ref=ref, clinic_id=clinic_id, state=JobState.RUNNING, lease_owner=owner, attempts=attempt,
        **fields,
    )
    job.clinic_ref, job.tenant_group_ref = row[6 + n], row[7 + n]
    return Claim(job_id, ref, clinic_id, owner, attempt, job=job, head_revision=row[5 + n])
