"""Replica reads (docs/deployment.md "Replica reads"): read-only pages and scrapes may read a streaming replica.

Off unless ``REPLICA_DATABASE_URL`` is set (then the ``replica`` alias, this router and the middleware are
installed by config/settings/base.py). Opt-in, never opt-out: a request reads the replica only when

- it is a GET or HEAD to a view named in ``REPLICA_READ_VIEWS`` (the console's lists and figures, FHIR searches,
  ``/metrics``), and
- it is not pinned: neither this request has written yet (any ORM write pins the rest of the request to the
  primary) nor did the same browser send a write in the last ``REPLICA_PIN_SECONDS`` (the ``cw_primary`` cookie
  every write request gets: read-your-writes across the redirect after a console action), and
- the model is not one that decides access (sessions, users, tokens, permissions: always the primary), and
- the replica is within the lag bound: it has replayed every commit acknowledged up to
  ``REPLICA_MAX_LAG_SECONDS`` ago (``ReplicaLag``); a replica further behind, or one that does not answer, is
  not read at all until it catches up (the primary serves the page), and
- the request is not a replay after a lost connection (``common.dbloss``): the replica may be what broke.

Everything else (every write, every read inside a write request, every task, raw SQL on ``connection``) uses
the primary as before. A browser's pin lasts ``max(REPLICA_PIN_SECONDS, REPLICA_MAX_LAG_SECONDS)``: a replica
read after it sees every commit made before it began, so the browser reads its own writes.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from . import queries
from .degrade import Dependency

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
_TRIED = "_replica_reads_tried"

#: After the replica (or the primary's sample) failed, the next try waits this long: a replica that does not
#: answer costs one request its connect timeout this often per process, not every request.
RETRY_AFTER_FAILURE_SECONDS = 5.0

replica_dependency = Dependency("database replica", "replica reads go to the primary until it answers again")


class ReplicaLag:
    """How stale this process may take the replica to be, measured on the engines' WAL positions, not on clocks.

    At most every ``REPLICA_LAG_CHECK_SECONDS`` a request that may read the replica samples the primary's WAL
    insert position (``pg_current_wal_insert_lsn()``) with the time, and the replica's replayed position. Once
    the replica has replayed past a sample taken at time *t*, it holds every commit acknowledged before *t*:
    ``as_of`` is the newest such *t*. The replica is read only while ``now - as_of <= REPLICA_MAX_LAG_SECONDS``.
    A replica that stops replaying (or never catches up under load) thus ages out of use within the bound,
    whatever its own ``pg_last_xact_replay_timestamp()`` says; one that errors is out at once (one log line per
    outage).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._samples: deque[tuple[float, int]] = deque(maxlen=256)
            self._checked_at: float | None = None
            self._wait = 0.0  # after a failure: seconds before the next try, not every request's connect timeout
            self.as_of: float | None = None

    def invalidate(self) -> None:
        """Forget what is known (the replica's connection broke): the next request samples again first."""
        self.reset()

    def current(self, now: float | None = None) -> bool:
        """The replica may be read now (sampling first when a sample is due)."""
        now = time.time() if now is None else now
        every = float(getattr(settings, "REPLICA_LAG_CHECK_SECONDS", 1.0))
        with self._lock:
            due = self._checked_at is None or not 0 <= now - self._checked_at < max(every, self._wait)
            if due:
                self._checked_at = now  # one sampler at a time; the others use what is known
        if due:
            self._sample(now)
        as_of = self.as_of
        return as_of is not None and now - as_of <= float(getattr(settings, "REPLICA_MAX_LAG_SECONDS", 5))

    def _sample(self, now: float) -> None:
        try:
            written = queries.wal_written(DEFAULT_DB_ALIAS)  # read after ``now``: covers what was acknowledged
            in_recovery, replayed = queries.wal_replayed(REPLICA_ALIAS)
        except DatabaseError as exc:
            replica_dependency.failed(exc)
            with self._lock:
                self._samples.clear()
                self.as_of = None
                self._wait = RETRY_AFTER_FAILURE_SECONDS
            return
        replica_dependency.ok()
        with self._lock:
            self._wait = 0.0
            if not in_recovery:  # a primary behind the replica's URL: nothing to lag
                self._samples.clear()
                self.as_of = now
                return
            self._samples.append((now, written))
            caught = [at for at, position in self._samples if replayed is not None and _reached(replayed, position)]
            if caught:
                newest = max(caught)
                self.as_of = newest if self.as_of is None else max(self.as_of, newest)
                while self._samples and self._samples[0][0] < newest:
                    self._samples.popleft()


#: WAL pages (``XLOG_BLCKSZ``, Debian's 8 kB) and the longest page header (a segment's first page).
WAL_PAGE_BYTES, WAL_PAGE_HEADER_BYTES = 8192, 40


def _reached(replayed: int, position: int) -> bool:
    """The replica has replayed up to ``position``. An insert position at a page's start points past the page header,
    where the end of the last record replayed points before it: the same place for an idle primary."""
    into_page = position % WAL_PAGE_BYTES
    return replayed >= position or (0 < into_page <= WAL_PAGE_HEADER_BYTES and replayed >= position - into_page)


lag = ReplicaLag()


def pin_seconds() -> int:
    """How long a browser that wrote reads only the primary: at least the lag bound (read-your-writes)."""
    return max(int(getattr(settings, "REPLICA_PIN_SECONDS", 5)), int(getattr(settings, "REPLICA_MAX_LAG_SECONDS", 5)))


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
            seconds = pin_seconds()
            response.set_cookie(PIN_COOKIE, str(int(time.time()) + seconds), max_age=seconds, httponly=True,
                                samesite="Lax", secure=settings.SESSION_COOKIE_SECURE)
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        state = _current.get()
        match = request.resolver_match
        if state is None or request.method not in SAFE_METHODS or match is None or state.pinned:
            return None
        if match.view_name not in settings.REPLICA_READ_VIEWS:
            return None
        if getattr(request, _TRIED, False):
            # A replay after a lost connection (common/dbloss.py): the replica may be what broke.
            lag.invalidate()
            return None
        setattr(request, _TRIED, True)
        state.allowed = lag.current()
        return None
