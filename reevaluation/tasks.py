"""Thin Celery wrappers. PostgreSQL is the truth: a lost, redelivered or duplicated message is a no-op."""

from __future__ import annotations

from celery import shared_task

from .services import dispatch_round as _dispatch_round
from .services import drain_refresh, rescue_expired_leases, wake_retries, worker


@shared_task(name="reevaluation.tasks.dispatch_round", ignore_result=True)
def dispatch_round() -> int:
    """Claim a fair round and hand each claim to a worker after the claims commit."""
    claims = _dispatch_round()  # committed on return: the messages below never outrun the claims
    for claim in claims:
        run_job.delay(claim.job_id, claim.owner, claim.attempt)
    return len(claims)


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
    """End proposals past their expiry and release their holds (``services.proposals.proposals_expire``)."""
    from .services.proposals import proposals_expire

    return proposals_expire()
