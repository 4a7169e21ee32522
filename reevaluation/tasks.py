"""Thin Celery wrappers. PostgreSQL is the truth: a lost, redelivered or duplicated message is a no-op."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from reevaluation.jobs import worker
from reevaluation.rounds import services as rounds
from reevaluation.services import dispatch_round as _dispatch_round
from reevaluation.services import drain_refresh, rescue_expired_leases, wake_retries

logger = logging.getLogger(__name__)


ROUND_KICK_KEY = "reevaluation:round-kick"


@shared_task(name="reevaluation.tasks.dispatch_round", ignore_result=True)
def dispatch_round() -> int:
    """Claim a fair round. With ``REEVALUATION_WORKER_ROUNDS`` run it here (``rounds.run_claims``: a round's
    quiet jobs and HELD replacements written back together), and when the round is full queue the next as
    this one starts, so a backlog keeps every pool process busy rather than waiting for beat's next tick;
    otherwise hand each claim to a ``run_job`` task."""
    if settings.REEVALUATION_WORKER_ROUNDS:
        cache.delete(ROUND_KICK_KEY)
        claims = _dispatch_round(for_worker=True)
        if len(claims) >= settings.REEVALUATION_DISPATCH_GLOBAL_LIMIT:
            _kick_round()
        return len(rounds.run_claims(claims, heartbeat=True))
    claims = _dispatch_round()  # committed on return: the messages below never outrun the claims
    for claim in claims:
        run_job.delay(claim.job_id, claim.owner, claim.attempt)
    return len(claims)


def _kick_round() -> None:
    """Queue one more round unless one is queued already; without Redis, beat's next tick runs it."""
    try:
        if cache.add(ROUND_KICK_KEY, 1, timeout=settings.REEVALUATION_LEASE_SECONDS):
            dispatch_round.delay()
    except Exception:  # noqa: BLE001 (kombu, redis and socket errors alike)
        logger.warning("reevaluation: next round not queued; beat's tick will run it")


@shared_task(name="reevaluation.tasks.run_job", ignore_result=True, acks_late=True)
def run_job(job_id: int, owner: str, attempt: int) -> str:
    return worker.job_run(job_id=job_id, owner=owner, attempt=attempt, heartbeat=True)


@shared_task(name="reevaluation.tasks.rescue_leases", ignore_result=True)
def rescue_leases() -> int:
    rescued = rescue_expired_leases()
    drain_refresh()
    return rescued


@shared_task(name="reevaluation.tasks.wake_retries", ignore_result=True)
def wake_retries_task() -> int:
    return wake_retries()


@shared_task(name="reevaluation.tasks.expire_proposals", ignore_result=True)
def expire_proposals() -> int:
    """End proposals past their expiry and release their holds (``proposals.services.proposals_expire``)."""
    from reevaluation.proposals.services import proposals_expire

    return proposals_expire()
