"""A request whose database connection broke (a PostgreSQL failover, PgBouncer restarting) is replayed once when
that is safe, otherwise answered 503 with ``Retry-After`` (docs/api.md "Errors", docs/runbook.md).

Safe to replay: a read (GET, HEAD, OPTIONS), and an (I) command run under its Idempotency-Key
(``common.api.views.idempotent_response`` marks the request): its receipt row is written in the command's own
transaction, so a replay either finds the committed answer or runs a command whose first try never committed.
Anything else may have committed before the connection broke, so the client is told to come back and decides.
The replay runs on a new connection: libpq's multi-host URL with ``target_session_attrs=read-write`` finds the
promoted primary. A refusal from PostgreSQL itself (a constraint, a serialization failure, a lock timeout) is
not connection loss and keeps its own handling.
"""

from __future__ import annotations

import logging

import psycopg
from django.conf import settings
from django.core.signals import got_request_exception
from django.db import DatabaseError, connections
from django.db import InterfaceError as DjangoInterfaceError
from django.db import OperationalError as DjangoOperationalError
from django.http import HttpResponse, JsonResponse

from .middleware import body_too_large

logger = logging.getLogger(__name__)

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
#: SQLSTATEs that mean the server went away or cannot take writes: admin or crash shutdown, a server still
#: starting, a read-only (demoted or standby) server. Class 08 (connection exception) as a whole too.
LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25006"})
_LOST = "_database_connection_lost"
_REPLAYABLE = "_database_replayable_command"


def connection_lost(exc: BaseException) -> bool:
    """The error is the connection's loss (no server answer, or one of ``LOST_SQLSTATES``), not a refusal."""
    if not isinstance(exc, DjangoOperationalError | DjangoInterfaceError | psycopg.OperationalError
                      | psycopg.InterfaceError):
        return False
    cause = exc.__cause__ if isinstance(exc, DatabaseError) and exc.__cause__ is not None else exc
    sqlstate = getattr(cause, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in LOST_SQLSTATES


def mark_replayable(request) -> None:
    """Called by the (I) command runner when the request carries an Idempotency-Key."""
    setattr(getattr(request, "_request", request), _REPLAYABLE, True)


def _drop_broken_connections() -> None:
    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a connection already gone cannot be closed any better
            logger.debug("closing a broken connection failed", exc_info=True)


def unavailable(request) -> HttpResponse:
    retry_after = str(int(getattr(settings, "DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS", 5)))
    detail = "The database is failing over; retry after the given seconds."
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"code": "SERVICE_UNAVAILABLE", "detail": detail}, status=503)
    else:
        response = HttpResponse(detail, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = retry_after
    response["Cache-Control"] = "no-store"
    return response


def _note_loss(sender, request=None, **kwargs) -> None:
    """An exception another middleware raised (sessions, authentication) reaches only this signal."""
    import sys

    exc = sys.exc_info()[1]
    if request is not None and exc is not None and connection_lost(exc):
        setattr(request, _LOST, True)


class DatabaseUnavailableMiddleware:
    """Outermost of the database users: replays once or answers 503 + Retry-After on connection loss."""

    def __init__(self, get_response):
        self.get_response = get_response
        got_request_exception.connect(_note_loss, dispatch_uid="common.dbloss")

    def __call__(self, request):
        may_replay = request.method in SAFE_METHODS or "Idempotency-Key" in request.headers
        if may_replay and request.method not in SAFE_METHODS and not body_too_large(request):
            request.body  # noqa: B018 - kept in memory, so a replay can parse it again
        response = self.get_response(request)
        if not getattr(request, _LOST, False):
            return response
        _drop_broken_connections()
        if request.method in SAFE_METHODS or getattr(request, _REPLAYABLE, False):
            logger.warning("database connection lost; replaying the request once", extra={"path": request.path})
            setattr(request, _LOST, False)
            response = self.get_response(request)
            if not getattr(request, _LOST, False):
                return response
            _drop_broken_connections()
        logger.warning("database connection lost; answered 503", extra={"path": request.path})
        return unavailable(request)

    def process_exception(self, request, exception):
        if connection_lost(exception):
            setattr(request, _LOST, True)
            return unavailable(request)
        return None
