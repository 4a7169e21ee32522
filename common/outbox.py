"""Outbox delivery: lease due rows with SKIP LOCKED, deliver outside any transaction, fence the result.

A message is leased by bumping its ``attempts``; the (lease_owner, attempts) pair is the fence, so a
worker whose lease expired and was reclaimed can record nothing. Failures back off exponentially up
to ``OUTBOX_MAX_ATTEMPTS``; then the row is DEAD with its last reason code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from . import queries
from .correlation import bound
from .models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus

logger = logging.getLogger(__name__)


class DeliveryFailed(Exception):
    """A send that did not happen; ``code`` is a bounded reason (never a provider's raw text)."""

    def __init__(self, code: str):
        self.code = code
        super().__init__(code)


class DeliveryDeferred(Exception):
    """Not now (quiet hours, a contact cap): try again at ``until`` without spending an attempt."""

    def __init__(self, until: datetime, code: str):
        self.until = until
        self.code = code
        super().__init__(code)


class DeliverySkipped(Exception):
    """Nothing to send any more (e.g. the offer closed): the row is finished as SENT with ``code`` and
    provider "skipped", but without ``sent_at``, so per-patient contact caps do not count it."""

    def __init__(self, code: str):
        self.code = code
        super().__init__(code)


@dataclass(frozen=True)
class Leased:
    id: int
    ref: str
    topic: str
    attempt: int
    worker: str
    #: The row as leased (read by the lease's last statement), so delivery need not read it again.
    message: OutboxMessage | None = field(default=None, compare=False, repr=False)


Handler = Callable[[OutboxMessage], str]
_HANDLERS: dict[str, Handler] = {}


def register_handler(topic: str, handler: Handler) -> None:
    """``handler(message)`` sends and returns the provider name, or raises DeliveryFailed/Deferred."""
    _HANDLERS[topic] = handler


def max_attempts() -> int:
    return getattr(settings, "OUTBOX_MAX_ATTEMPTS", 6)


def backoff(attempt: int) -> timedelta:
    base = getattr(settings, "OUTBOX_BACKOFF_SECONDS", 30)
    return timedelta(seconds=min(base * 2 ** (attempt - 1), 3600))


def outbox_lease(*, worker: str, limit: int = 50, lease_seconds: int = 60, now: datetime | None = None,
                 topics: list[str] | None = None, aggregate_ref: str | None = None) -> list[Leased]:
    """Lease due PENDING rows and rows whose lease expired (a killed worker), oldest first, in one statement; with
    ``aggregate_ref``, only the rows that row's change wrote (``outbox_deliver_written``)."""
    now = now or timezone.now()
    topics = topics if topics is not None else list(_HANDLERS)
    rows = queries.outbox_lease_rows(worker=worker, until=now + timedelta(seconds=lease_seconds), now=now,
                                     topics=topics, limit=limit, aggregate_ref=aggregate_ref)
    leased = sorted(rows, key=lambda m: (m.created_at, m.id))
    return [Leased(id=m.id, ref=m.ref, topic=m.topic, attempt=m.attempts, worker=worker, message=m) for m in leased]


@dataclass(frozen=True)
class _Result:
    """What a finished attempt writes on its message (besides releasing the lease)."""

    status: str
    error: str = ""
    next_attempt_at: datetime | None = None  # set (a deferral or a retry): the row is due again then
    sent_at: datetime | None = None
    give_back: bool = False  # a deferral is not a failed attempt


def _finish(lease: Leased, *, started_at: datetime, outcome: str, result: _Result, code: str = "",
            provider: str = "") -> bool:
    """Write back under the fence, with the attempt's row (one per (message, attempt), ``outbox_attempt_once``:
    the first writer's stands), in one statement; False if the lease was lost (another worker owns the row now,
    and the attempt is recorded FENCED / LEASE_LOST)."""
    return queries.outbox_attempt_finish(
        message_id=lease.id, worker=lease.worker, attempt=lease.attempt, status=result.status, error=result.error,
        give_back=result.give_back, next_attempt_at=result.next_attempt_at, sent_at=result.sent_at,
        outcome=outcome, code=code, provider=provider, started_at=started_at, finished_at=timezone.now())


def outbox_deliver(lease: Leased) -> str:
    """Deliver one leased message under the correlation id of the change that wrote it (so the
    delivery's log lines join that story); returns the outcome recorded."""
    started_at = timezone.now()
    message = lease.message if lease.message is not None else OutboxMessage.objects.get(id=lease.id)
    with bound(message.correlation_id):
        return _deliver(lease, message, started_at)


def _deliver(lease: Leased, message: OutboxMessage, started_at: datetime) -> str:
    handler = _HANDLERS.get(lease.topic)
    try:
        if handler is None:
            raise DeliveryFailed("NO_HANDLER")
        provider = handler(message)
    except DeliveryDeferred as deferred:
        _finish(lease, started_at=started_at, outcome=DeliveryOutcome.DEFERRED, code=deferred.code, result=_Result(
            OutboxStatus.PENDING, error=deferred.code, next_attempt_at=deferred.until, give_back=True))
        return DeliveryOutcome.DEFERRED
    except DeliverySkipped as skipped:
        done = _finish(lease, started_at=started_at, outcome=DeliveryOutcome.SENT, code=skipped.code,
                       provider="skipped", result=_Result(OutboxStatus.SENT, error=skipped.code))
        return DeliveryOutcome.SENT if done else DeliveryOutcome.FENCED
    except DeliveryFailed as failed:
        return _fail(lease, started_at, failed.code)
    except Exception:  # noqa: BLE001 - a provider bug must not kill the loop; the code is bounded
        logger.exception("outbox delivery crashed message=%s topic=%s", lease.ref, lease.topic)
        return _fail(lease, started_at, "HANDLER_ERROR")
    done = _finish(lease, started_at=started_at, outcome=DeliveryOutcome.SENT, provider=provider,
                   result=_Result(OutboxStatus.SENT, sent_at=timezone.now()))
    logger.info("outbox delivered message=%s topic=%s attempt=%s provider=%s fenced=%s", lease.ref, lease.topic,
                lease.attempt, provider, not done)
    return DeliveryOutcome.SENT if done else DeliveryOutcome.FENCED


def _fail(lease: Leased, started_at: datetime, code: str) -> str:
    dead = lease.attempt >= max_attempts()
    result = _Result(OutboxStatus.DEAD, error=code) if dead else _Result(
        OutboxStatus.PENDING, error=code, next_attempt_at=timezone.now() + backoff(lease.attempt))
    logger.warning("outbox delivery failed message=%s attempt=%s code=%s dead=%s", lease.ref, lease.attempt,
                   code, dead)
    done = _finish(lease, started_at=started_at, outcome=DeliveryOutcome.FAILED, code=code, result=result)
    return DeliveryOutcome.FAILED if done else DeliveryOutcome.FENCED


def outbox_deliver_due(*, worker: str, limit: int = 50, now: datetime | None = None) -> dict[str, int]:
    """One bounded delivery round: lease, then deliver each. Call it outside a transaction: sends are
    network calls and must not hold row locks."""
    return _deliver_all(outbox_lease(worker=worker, limit=limit, now=now))


def outbox_deliver_written(*, worker: str, topic: str, aggregate_ref: str) -> dict[str, int]:
    """Deliver at once what one change just wrote (its ``topic`` rows for ``aggregate_ref``), from the task that
    made the change, rather than queueing a delivery run for it: under a storm of offers that is one task and one
    broker round trip less per notice. The same lease, fence and handler as ``outbox_deliver_due``; a row another
    worker leased first is skipped (SKIP LOCKED), one not yet due (a deferral) waits for its time."""
    return _deliver_all(outbox_lease(worker=worker, limit=10, topics=[topic], aggregate_ref=aggregate_ref))


def _deliver_all(leases: list[Leased]) -> dict[str, int]:
    """Deliver each leased row in order; the outcomes counted."""
    counts: dict[str, int] = {}
    for lease in leases:
        outcome = outbox_deliver(lease)
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def outbox_reclaim_expired(*, now: datetime | None = None, limit: int = 500) -> int:
    """Put rows whose lease expired back to PENDING (a killed worker); leasing also takes them directly."""
    now = now or timezone.now()
    with transaction.atomic():
        ids = list(
            OutboxMessage.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(status=OutboxStatus.LEASED, lease_expires_at__lt=now)
            .values_list("id", flat=True)[:limit]
        )
        expired = OutboxMessage.objects.filter(id__in=ids).values_list("id", "attempts", "lease_owner")
        OutboxAttempt.objects.bulk_create(
            [OutboxAttempt(message_id=i, attempt=a, worker=w, outcome=DeliveryOutcome.FENCED,
                           error_code="LEASE_EXPIRED", started_at=now, finished_at=now) for i, a, w in expired],
            ignore_conflicts=True,
        )
        return OutboxMessage.objects.filter(id__in=ids).update(
            status=OutboxStatus.PENDING, lease_owner="", lease_expires_at=None, next_attempt_at=now,
            version=F("version") + 1,
        )
