"""Readiness as Kubernetes means it: can *this* process serve? The database answers and every
migration is applied. Beat, the workers and the broker are reported beside it (state and age), but
never gate it: web serves claims and the console without them, and a load balancer must not take
every web process out because beat is late.

Each check answers a bare word ("ok", "down", "stale", "never", "pending", "cannot_send", "unreachable")
and, for the background components, an age in seconds; no error text, host, name or version ever leaves
here, because /readyz is unauthenticated. Workers are "unreachable" while the broker is down: alive (their
heartbeat is in PostgreSQL) but no task can reach them, so never "ok" (issue 43).

A failing check is logged once when it starts failing and once when it is back (``common.degrade``), not
with a traceback per probe: a load balancer probes every few seconds.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from kombu import Connection

from common.degrade import Dependency

from . import queries

logger = logging.getLogger(__name__)

readyz_database = Dependency("database (readiness)", "/readyz answers 503 until it is back")
readyz_broker = Dependency("celery broker (readiness)", "workers are reported unreachable until it is back")

_migrations_ok = False


def check_database() -> str:
    try:
        queries.database_round_trip()
    except Exception as exc:  # noqa: BLE001 - any failure is "down"; the reason goes to the log only, once
        readyz_database.failed(exc)
        connections[DEFAULT_DB_ALIAS].close_if_unusable_or_obsolete()
        return "down"
    readyz_database.ok()
    return "ok"


#: broker URL → (monotonic time of the check, its answer): a down broker costs a probe its timeout at most
#: once per ``READYZ_BROKER_CHECK_EVERY_SECONDS``, so /readyz and /metrics answer fast during the outage.
_broker_checked: dict[str, tuple[float, str]] = {}


def check_broker() -> str:
    url = settings.CELERY_BROKER_URL
    every = float(getattr(settings, "READYZ_BROKER_CHECK_EVERY_SECONDS", 10.0))
    now = time.monotonic()
    known = _broker_checked.get(url)
    if known is not None and now - known[0] < every:
        return known[1]
    timeout = float(getattr(settings, "READYZ_BROKER_TIMEOUT_SECONDS", 1.0))
    try:
        with Connection(url, connect_timeout=timeout,
                        transport_options={**settings.CELERY_BROKER_TRANSPORT_OPTIONS,  # a Sentinel's master_name
                                           "socket_timeout": timeout, "max_retries": 0}) as broker:
            broker.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
        state = "ok"
        readyz_broker.ok()
    except Exception as exc:  # noqa: BLE001
        readyz_broker.failed(exc)
        state = "down"
    _broker_checked[url] = (now, state)
    return state


def check_jobs(now=None) -> dict:
    """The waitlist beat jobs' last run (JobRun): stale past ``READYZ_BEAT_MAX_AGE_SECONDS``. A job runs
    only when beat sent it, the broker carried it and a worker ran it: the end-to-end evidence."""
    from waitlist.models import JobRun

    now = now or timezone.now()
    last = JobRun.objects.order_by("-last_run_at").values_list("last_run_at", flat=True).first()
    if last is None:
        return {"state": "never"}
    age = max(0.0, (now - last).total_seconds())
    max_age = int(getattr(settings, "READYZ_BEAT_MAX_AGE_SECONDS", 300))
    return {"state": "ok" if age <= max_age else "stale", "age_seconds": round(age, 1)}


def background(database_up: bool) -> dict[str, dict]:
    """Beat, workers, beat jobs and broker, each ``{"state", "age_seconds"?}``: information, not the gate."""
    from . import components

    broker = check_broker()
    report: dict[str, dict] = {"broker": {"state": broker}}
    if not database_up:
        return {**report, "beat": {"state": "unknown"}, "workers": {"state": "unknown"},
                "jobs": {"state": "unknown"}}
    try:
        report["beat"] = components.beat().as_dict()
        report["workers"] = components.workers(broker_up=broker == "ok").as_dict()
        report["jobs"] = check_jobs()
    except Exception:  # noqa: BLE001 - e.g. the table is not migrated yet
        logger.warning("readyz background report failed", exc_info=True)
        report.update({name: {"state": "unknown"} for name in ("beat", "workers", "jobs")})
    return report


def check_migrations() -> str:
    """No unapplied migration (remembered once true: a running process never un-applies one)."""
    global _migrations_ok
    if _migrations_ok:
        return "ok"
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception:  # noqa: BLE001
        return "down"
    _migrations_ok = not pending
    return "ok" if _migrations_ok else "pending"


def readiness() -> tuple[bool, dict[str, str], dict[str, dict]]:
    """(ready, the gating checks, the background report)."""
    checks = {"database": check_database()}
    database_up = checks["database"] == "ok"
    checks["migrations"] = check_migrations() if database_up else "unknown"
    ready = all(value == "ok" for value in checks.values())
    return ready, checks, background(database_up and checks["migrations"] == "ok")
