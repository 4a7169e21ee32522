"""A job's lease: its fence, fenced transitions, the take-over and renewal (``LeaseKeeper`` renews while a worker
waits on the CRM), rescue of expired leases and the retry wake-up.

Every job write goes through ``common.cas`` (the move is checked against ``JOB_TRANSITIONS``; one
conditional UPDATE). Writes by a worker are fenced on ``lease_owner`` and ``attempts``: a worker
whose lease was rescued (and maybe re-claimed) no longer matches, so it can change nothing.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings as dj_settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from common.cas import cas_update, cas_update_all
from common.errors import Conflict
from reevaluation.models import (
    ClinicReevaluationSettings,
    JobState,
    ReevaluationHead,
    ReevaluationJob,
)
from reevaluation.queries import fence_guard, job_scope

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fence:
    """Who holds a RUNNING job's lease, and for which attempt."""

    job_id: int
    owner: str
    attempt: int


def head_revision(job: ReevaluationJob) -> int | None:
    return ReevaluationHead.objects.filter(**job_scope(job)).values_list("revision", flat=True).first()


def fenced_update(fence: Fence, *, extra=None, **changes) -> bool:
    """One fenced CAS on a RUNNING job (the move checked against ``JOB_TRANSITIONS``); False if the
    fence (or an ``extra`` guard) no longer holds. A move the table does not list still raises."""
    guard = fence_guard(fence)
    if extra:
        guard &= Q(**extra) if isinstance(extra, dict) else extra  # a dict of filters, a Q or an expression
    try:
        cas_update(ReevaluationJob, pk=fence.job_id, expected_status=JobState.RUNNING, fence=guard, **changes)
    except Conflict as exc:
        if exc.code.endswith("_TRANSITION_INVALID"):
            raise
        return False
    return True


def lease_renew(fence: Fence, *, now: datetime | None = None) -> bool:
    """Extend a live lease. An expired or lost lease is not revived: the failure is counted instead."""
    now = now or timezone.now()
    if fenced_update(
        fence,
        extra={"lease_expires_at__gt": now},
        lease_expires_at=now + timedelta(seconds=dj_settings.REEVALUATION_LEASE_SECONDS),
        lease_renewed_at=now,
    ):
        return True
    job = ReevaluationJob.objects.filter(pk=fence.job_id).values("clinic_id").first()
    if job is not None:
        ReevaluationJob.objects.filter(pk=fence.job_id).update(renewal_failures=F("renewal_failures") + 1)
        ClinicReevaluationSettings.objects.filter(clinic_id=job["clinic_id"]).update(
            lease_renewal_failures=F("lease_renewal_failures") + 1
        )
    logger.warning("reevaluation lease renewal failed job_id=%s attempt=%s", fence.job_id, fence.attempt)
    return False


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


def retry_delay(job: ReevaluationJob, attempt: int) -> timedelta:
    """Exponential cooldown, capped."""
    seconds = job.cooldown_seconds * (2 ** max(attempt - 1, 0))
    return timedelta(seconds=min(seconds, dj_settings.REEVALUATION_MAX_COOLDOWN_SECONDS))


def rescue_expired_leases(*, now: datetime | None = None, limit: int = 500) -> int:
    """Beat: RUNNING jobs whose lease expired go back to PENDING (or FAILED when attempts are spent).

    Rows are taken with SKIP LOCKED so a worker mid-write-back is not waited on; its own fenced
    write-back decides. Returns how many jobs were rescued.
    """
    now = now or timezone.now()
    rescued = 0
    with transaction.atomic():
        expired = list(
            ReevaluationJob.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(state=JobState.RUNNING, lease_expires_at__lt=now)
            .order_by("pk")[:limit]
        )
        for job in expired:
            exhausted = job.attempts >= job.max_attempts
            rescued += fenced_update(
                Fence(job.pk, job.lease_owner, job.attempts),
                state=JobState.FAILED if exhausted else JobState.PENDING,
                last_failure_code="LEASE_EXPIRED",
                lease_owner="",
                lease_expires_at=None,
                finished_at=now if exhausted else None,
            )
    if rescued:
        logger.info("reevaluation rescued %s expired leases", rescued)
    return rescued


def wake_retries(*, now: datetime | None = None, limit: int = 1000) -> int:
    """Beat: RETRY_WAIT jobs whose cooldown has passed become PENDING (claimable). Idempotent."""
    now = now or timezone.now()
    ids = list(
        ReevaluationJob.objects.filter(state=JobState.RETRY_WAIT, next_attempt_at__lte=now)
        .order_by("next_attempt_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )
    if not ids:
        return 0
    return cas_update_all(
        ReevaluationJob.objects.filter(pk__in=ids, next_attempt_at__lte=now),
        expected_status=JobState.RETRY_WAIT,
        state=JobState.PENDING,
    )
