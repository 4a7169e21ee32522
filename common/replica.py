"""Replica reads (docs/deployment.md "Replica reads"): read-only pages and scrapes may read a streaming replica.

Off unless ``REPLICA_DATABASE_URL`` is set (then the ``replica`` alias, this router and the middleware are
installed by config/settings/base.py). Opt-in, never opt-out: a request reads the replica only when

- it is a GET or HEAD to a view named in ``REPLICA_READ_VIEWS`` (the console's lists and figures, FHIR searches,
  ``/metrics``), and
- it is not pinned: neither this request has written yet (any ORM write pins the rest of the request to the
  primary) nor did the same browser send a write in the last ``REPLICA_PIN_SECONDS`` (the ``cw_primary`` cookie
  every write request gets: read-your-writes across the redirect after a console action), and
- the model is not one that decides access (sessions, users, tokens, permissions: always the primary).

Everything else (every write, every read inside a write request, every task, raw SQL on ``connection``) uses
the primary as before. ``REPLICA_PIN_SECONDS`` is the lag the deployment accepts: pick it above the replica's
worst replay lag (``pg_stat_replication.replay_lag``; alert ``ReplicaLagHigh`` in the runbook).
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings

REPLICA_ALIAS = "replica"
PIN_COOKIE = "cw_primary"
SAFE_METHODS = ("GET", "HEAD")
#: Reads that decide who may do what stay on the primary whatever the page.
PRIMARY_ONLY_APPS = frozenset({"sessions", "auth", "authtoken", "guardian", "contenttypes", "admin"})


@dataclass
class _Reads:
    allowed: bool = False
    pinned: bool = False


_current: ContextVar[_Reads | None] = ContextVar("replica_reads", default=None)


class ReplicaRouter:
    """Reads go to ``replica`` only inside a request the middleware allowed and nothing pinned."""

    def db_for_read(self, model, **hints):
        state = _current.get()
        if state is None or not state.allowed or state.pinned or model._meta.app_label in PRIMARY_ONLY_APPS:
            return None
        return REPLICA_ALIAS

    def db_for_write(self, model, **hints):
        state = _current.get()
        if state is not None:
            state.pinned = True
        return None

    def allow_relation(self, obj1, obj2, **hints):
        return True  # one database, two copies of it

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return False if db == REPLICA_ALIAS else None


def pinned_by_cookie(request, now: float | None = None) -> bool:
    try:
        until = float(request.COOKIES.get(PIN_COOKIE, "0"))
    except ValueError:
        return False
    return until > (now if now is not None else time.time())


class ReplicaReadsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        state = _Reads(pinned=pinned_by_cookie(request))
        token = _current.set(state)
        try:
            response = self.get_response(request)
        finally:
            _current.reset(token)
        wrote = request.method not in SAFE_METHODS or (state.pinned and not pinned_by_cookie(request))
        # Browsers only (a session cookie): API and scrape clients read nothing from the replica after a write.
        if wrote and settings.SESSION_COOKIE_NAME in request.COOKIES:
            # Raw SQL writes bypass the router, so every write request pins, not only the ORM's.
            seconds = int(getattr(settings, "REPLICA_PIN_SECONDS", 5))
            response.set_cookie(PIN_COOKIE, str(int(time.time()) + seconds), max_age=seconds, httponly=True,
                                samesite="Lax", secure=settings.SESSION_COOKIE_SECURE)
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        state = _current.get()
        match = request.resolver_match
        if state is not None and request.method in SAFE_METHODS and match is not None:
            state.allowed = match.view_name in settings.REPLICA_READ_VIEWS
        return None
