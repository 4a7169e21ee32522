"""The background components as an operator needs them: beat, workers and the broker, each with a
state and an age. Read by /readyz (as information, never as the gate) and /metrics.

Writers are the processes themselves (``beat_seen``, ``worker_seen``): a beat or worker that cannot
reach the broker still records that it is alive, so "beat is up but cannot send" and "the broker is
down" are told apart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from common.degrade import Dependency

from .models import Heartbeat, ProcessRole

logger = logging.getLogger(__name__)

heartbeat_store = Dependency("heartbeat store (PostgreSQL)", "/readyz and /metrics show stale ages until it is back")


def _max_age() -> float:
    return float(getattr(settings, "COMPONENT_STALE_SECONDS", 90))


def _write(role: str, name: str, **fields) -> None:
    """Upsert one heartbeat; a database error is logged once per outage, never raised into the process."""
    now = timezone.now()
    try:
        if not connection.in_atomic_block:  # a long-lived timer thread: drop a connection that broke meanwhile
            close_old_connections()
        Heartbeat.objects.update_or_create(role=role, name=name, defaults={"seen_at": now, **fields})
        heartbeat_store.ok()
    except DatabaseError as exc:
        heartbeat_store.failed(exc)


def worker_seen(name: str) -> None:
    _write(ProcessRole.WORKER, name)


def beat_seen(name: str, *, sent: bool | None = None) -> None:
    """``sent``: True after a task reached the broker, False after a send failed, None for a plain tick."""
    now = timezone.now()
    fields = {} if sent is None else ({"sent_at": now} if sent else {"send_failed_at": now})
    _write(ProcessRole.BEAT, name, **fields)


#: The row every process writes when an after-commit send failed (``ProcessRole.SENDER``): one short UPDATE per
#: failed send, only during an outage (none is skipped: one beat's catch-up came between would miss it).
SENDER_ROW = "after-commit"


def effect_send_failed() -> None:
    """An after-commit follow-up (a vacancy's dispatch) could not reach the broker from this process: noted in
    PostgreSQL, because beat may have seen no outage itself (a short one can fall between two of its sends) and
    reads this to send reconcile as soon as the broker is back (observability/beat.py). Registered with
    ``common.effects.send_failure_register`` at ready; runs after the commit, outside any transaction."""
    at = timezone.now()
    try:
        Heartbeat.objects.update_or_create(role=ProcessRole.SENDER, name=SENDER_ROW,
                                           defaults={"seen_at": at, "send_failed_at": at})
        heartbeat_store.ok()
    except DatabaseError as exc:
        heartbeat_store.failed(exc)


def last_send_failure() -> datetime | None:
    """When a web or worker process last could not send an after-commit follow-up (None: never)."""
    return Heartbeat.objects.filter(role=ProcessRole.SENDER, name=SENDER_ROW).values_list(
        "send_failed_at", flat=True).first()


@dataclass(frozen=True)
class Component:
    state: str  # ok | stale | never | down | cannot_send | unreachable | unknown
    age_seconds: float | None = None
    alive: int | None = None  # workers seen within the stale age
    send_age_seconds: float | None = None  # beat: since its last task reached the broker

    def as_dict(self) -> dict:
        body: dict = {"state": self.state}
        if self.age_seconds is not None:
            body["age_seconds"] = round(self.age_seconds, 1)
        if self.send_age_seconds is not None:
            body["last_send_age_seconds"] = round(self.send_age_seconds, 1)
        return body


def _age(now: datetime, at: datetime | None) -> float | None:
    return max(0.0, (now - at).total_seconds()) if at else None


def beat(now: datetime | None = None) -> Component:
    now = now or timezone.now()
    row = Heartbeat.objects.filter(role=ProcessRole.BEAT).order_by("-seen_at").first()
    if row is None:
        return Component("never")
    age, send_age = _age(now, row.seen_at), _age(now, row.sent_at)
    if age is not None and age > _max_age():
        state = "stale"
    elif row.send_failed_at and (row.sent_at is None or row.send_failed_at > row.sent_at):
        state = "cannot_send"
    else:
        state = "ok"
    return Component(state, age, send_age_seconds=send_age)


def workers(now: datetime | None = None, *, broker_up: bool = True) -> Component:
    """Alive workers are "ok" only while the broker is up: with it down they run but no task reaches them
    ("unreachable"), and an operator must not read "ok" then (issue 43)."""
    now = now or timezone.now()
    seen = list(Heartbeat.objects.filter(role=ProcessRole.WORKER).values_list("seen_at", flat=True))
    if not seen:
        return Component("never", alive=0)
    ages = [_age(now, at) or 0.0 for at in seen]
    alive = sum(1 for age in ages if age <= _max_age())
    if not alive:
        return Component("stale", min(ages), alive=0)
    return Component("ok" if broker_up else "unreachable", min(ages), alive=alive)
