"""Readiness checks: database, broker, beat's last run, migrations applied.

Each check answers a bare word ("ok", "down", "stale", "never", "pending"); no error text, host,
version or count ever leaves here, because /readyz is unauthenticated.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from kombu import Connection

logger = logging.getLogger(__name__)

_migrations_ok = False


def check_database() -> str:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception:  # noqa: BLE001 - any failure is "down"; the reason goes to the log only
        logger.warning("readyz database check failed", exc_info=True)
        connections[DEFAULT_DB_ALIAS].close_if_unusable_or_obsolete()
        return "down"


def check_broker() -> str:
    timeout = float(getattr(settings, "READYZ_BROKER_TIMEOUT_SECONDS", 1.0))
    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=timeout,
                        transport_options={"socket_timeout": timeout, "max_retries": 0}) as broker:
            broker.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
        return "ok"
    except Exception:  # noqa: BLE001
        logger.warning("readyz broker check failed", exc_info=True)
        return "down"


def check_beat(now=None) -> str:
    """Beat is alive if a waitlist beat job (JobRun) ran within ``READYZ_BEAT_MAX_AGE_SECONDS``."""
    from waitlist.models import JobRun

    now = now or timezone.now()
    try:
        last = JobRun.objects.order_by("-last_run_at").values_list("last_run_at", flat=True).first()
    except Exception:  # noqa: BLE001
        return "down"
    if last is None:
        return "never"
    max_age = int(getattr(settings, "READYZ_BEAT_MAX_AGE_SECONDS", 300))
    return "ok" if (now - last).total_seconds() <= max_age else "stale"


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


def readiness() -> tuple[bool, dict[str, str]]:
    checks = {"database": check_database()}
    checks["broker"] = check_broker()
    database_up = checks["database"] == "ok"
    checks["beat"] = check_beat() if database_up else "unknown"
    checks["migrations"] = check_migrations() if database_up else "unknown"
    return all(value == "ok" for value in checks.values()), checks
