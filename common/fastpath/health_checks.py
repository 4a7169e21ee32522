"""Django's connection health check only where it matters (issue 15).

With ``CONN_HEALTH_CHECKS`` Django sends ``SELECT 1`` on the first query of every request that
reuses a persistent connection: one more round trip per API call (the claim is seven statements).
The check exists for a connection that went bad while it sat idle between requests (a database
restart or failover, an idle timeout in PgBouncer or a firewall). A connection that finished a
request without errors less than ``DATABASE_HEALTH_CHECK_IDLE_SECONDS`` ago has just been used, so
that request skips the check; a connection idle for longer is still checked before its first query,
and one that saw errors is checked by Django at the end of the request as before. ``0`` checks
every request (Django's behaviour). The receivers must run after Django's ``close_old_connections``
(true in a web worker: it is connected when ``django.db`` is imported); in the other order every
request is checked, as without this module. Off (``FASTPATHS=off``): every request is checked, Django's way.

Relies on Django's ``BaseDatabaseWrapper.health_check_done`` flag (set to skip the check; Django resets it
in ``close_if_health_check_failed`` and ``close_old_connections``) and on ``errors_occurred``.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import connections

from .switch import enabled

_DONE_AT = "_cw_request_done_at"
#: The clock the idle window is measured on (tests move it by hand: time-machine leaves monotonic alone).
clock = time.monotonic


def _request_finished(**_kwargs) -> None:
    # Runs after Django's own close_old_connections (connected first, at import of django.db).
    now = clock()
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.errors_occurred:
            setattr(conn, _DONE_AT, now)


def _request_started(**_kwargs) -> None:
    window = settings.DATABASE_HEALTH_CHECK_IDLE_SECONDS
    if window <= 0 or not enabled():
        return
    now = clock()
    for conn in connections.all(initialized_only=True):
        done_at = getattr(conn, _DONE_AT, None)
        if conn.connection is not None and done_at is not None and now - done_at < window:
            setattr(conn, "health_check_done", True)  # noqa: B010 - not in the wrapper's stubs


def connect_signals() -> None:
    request_started.connect(_request_started, dispatch_uid="common.fastpath.health_checks.started")
    request_finished.connect(_request_finished, dispatch_uid="common.fastpath.health_checks.finished")


def connect_signals_last() -> None:
    """Reconnect after Django's ``close_old_connections`` (which resets the flag this module sets)."""
    request_started.disconnect(dispatch_uid="common.fastpath.health_checks.started")
    request_finished.disconnect(dispatch_uid="common.fastpath.health_checks.finished")
    connect_signals()
