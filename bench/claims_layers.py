"""Where one claim's time goes, per layer: the claims benchmark's in-process probe, timed by wrappers.

Django's test client drives the whole stack (middleware, DRF, the view, the service, the response)
one claim at a time; thin ``perf_counter`` wrappers around the layer boundaries (not a sampling or
tracing profiler, whose own cost would swamp the small layers) add up each layer's wall time, and an
``execute_wrapper`` the time spent inside ``cursor.execute`` per layer. Each layer's figure is its
own time: the time of the layers nested inside it is subtracted.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from contextlib import ExitStack

#: (label, parent label, object, attribute): the wrapped boundaries, outermost first.
LAYERS = (
    ("request", None, "django.test.client:ClientHandler", "__call__"),
    ("view", "request", "rest_framework.views:APIView", "dispatch"),
    ("auth", "view", "rest_framework.views:APIView", "perform_authentication"),
    ("permissions", "view", "rest_framework.views:APIView", "check_permissions"),
    ("throttles", "view", "rest_framework.views:APIView", "check_throttles"),
    ("scope", "view", "common.api.views:scope_clinic", None),
    ("receipt", "view", "common.api.views:idempotent_response", None),
    ("serializer", "receipt", "common.api.views:ClinicAPIView", "validated"),
    ("service", "receipt", "waitlist.services:offer_claim", None),
    ("commit", "receipt", "django.db.backends.base.base:BaseDatabaseWrapper", "commit"),
    ("response", "view", "rest_framework.views:APIView", "finalize_response"),
)

DESCRIPTIONS = {
    "request": "WSGI handler and the middleware chain (everything outside the DRF view)",
    "view": "DRF dispatch itself (request wrapping, content negotiation)",
    "auth": "token authentication (`Authorization: Token …` → user)",
    "permissions": "permission classes",
    "throttles": "throttles (Redis counters)",
    "scope": "clinic scope and role (`clinic_for_user`: one prepared statement)",
    "receipt": "idempotency receipt: key check, request digest, INSERT, stored answer UPDATE, BEGIN",
    "serializer": "body validation (`ClaimInput`)",
    "service": "`offer_claim`: lock chain, checks, the write statement (both prepared, compiled once per process)",
    "commit": "COMMIT",
    "response": "response finalisation (headers, no rendering: the stored bytes are the body)",
}


def _resolve(path: str):
    import importlib

    module, _, name = path.partition(":")
    owner = importlib.import_module(module)
    return owner, name


class LayerTimer:
    """Wraps the boundaries in ``LAYERS`` for the duration of a ``with`` block."""

    def __init__(self) -> None:
        self.total = defaultdict(float)  # label -> inclusive seconds
        self.sql = defaultdict(float)  # label -> seconds inside cursor.execute, by innermost layer
        self.stack: list[str] = []
        self._exit = ExitStack()

    def _wrap(self, label: str, fn):
        timer = self

        def wrapped(*args, **kwargs):
            timer.stack.append(label)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timer.total[label] += time.perf_counter() - start
                timer.stack.pop()

        wrapped.__wrapped__ = fn
        return wrapped

    def _execute(self, execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.sql[self.stack[-1] if self.stack else "request"] += time.perf_counter() - start

    def __enter__(self) -> LayerTimer:
        from django.db import connection

        for label, _parent, path, attr in LAYERS:
            owner, name = _resolve(path)
            if attr is None:  # a module-level function, patched where the caller looks it up
                original = getattr(owner, name)
                setattr(owner, name, self._wrap(label, original))
                self._exit.callback(setattr, owner, name, original)
            else:
                cls = getattr(owner, name)
                original = cls.__dict__[attr]
                setattr(cls, attr, self._wrap(label, original))
                self._exit.callback(setattr, cls, attr, original)
        self._exit.enter_context(connection.execute_wrapper(self._execute))
        return self

    def __exit__(self, *exc) -> None:
        self._exit.close()

    def own(self) -> dict[str, float]:
        """Each layer's exclusive seconds (its children's subtracted)."""
        own = dict(self.total)
        for label, parent, _path, _attr in LAYERS:
            if parent is not None:
                own[parent] = own.get(parent, 0.0) - self.total.get(label, 0.0)
        return own


def post_claim(client, clinic_ref: str, ref: str, token: str, key: str):
    """One claim through Django's test client, as wrk sends it (bench/claims.lua)."""
    return client.post(
        f"/api/v1/clinics/{clinic_ref}/offers/{ref}/claim",
        data='{"expected_version": 1}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def profile_claims(offers: list[tuple[str, str]], token: str) -> dict:
    """Claim ``offers`` one at a time in process; per layer the median ms of own time and of SQL time."""
    from django.test import Client

    client = Client()
    per_layer: dict[str, list[float]] = defaultdict(list)
    per_layer_sql: dict[str, list[float]] = defaultdict(list)
    totals, statuses = [], []
    for clinic_ref, ref in offers:
        with LayerTimer() as timer:
            start = time.perf_counter()
            response = post_claim(client, clinic_ref, ref, token, f"bench-layers-{ref}")
            totals.append((time.perf_counter() - start) * 1000)
        statuses.append(response.status_code)
        own = timer.own()
        for label, *_ in LAYERS:
            per_layer[label].append(own.get(label, 0.0) * 1000)
            per_layer_sql[label].append(timer.sql.get(label, 0.0) * 1000)
    return {
        "claims": len(offers),
        "status": max(statuses),
        "total_ms": statistics.median(totals),
        "layers": [
            {
                "layer": label,
                "ms": statistics.median(per_layer[label]),
                "sql_ms": statistics.median(per_layer_sql[label]),
                "what": DESCRIPTIONS[label],
            }
            for label, *_ in LAYERS
        ],
    }


def cprofile_claims(offers: list[tuple[str, str]], token: str, *, top: int = 60, sort: str = "tottime") -> str:
    """Claim ``offers`` one at a time under cProfile (a deterministic profiler: its own cost inflates
    small calls, so read it for *which* functions dominate, with the wrapper timings for *how much*).
    Returns pstats' listing of the ``top`` functions by ``sort``."""
    import cProfile
    import io
    import pstats

    from django.test import Client

    client = Client()
    profile = cProfile.Profile()
    profile.enable()
    for clinic_ref, ref in offers:
        post_claim(client, clinic_ref, ref, token, f"bench-cprofile-{ref}")
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats(sort).print_stats(top)
    return out.getvalue()


def main() -> None:
    """``python -m bench.claims_layers [N] [--cprofile [tottime|cumulative]]``: a fresh bench database,
    N offers (default 100), the per-layer table (or cProfile's listing of the same claims)."""
    import json
    import sys

    from . import db

    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 100
    db.configure_environment()
    db.recreate_database(db.bench_url())
    import django

    django.setup()
    db.migrate()
    from scheduling.models import Role
    from scheduling.services import clinic_grant_role

    from .offers import make_offers

    clinics, offers = make_offers("layers", n)
    user, token = db.staff_user(clinics[0], "bench-layers")
    for other in clinics[1:]:
        clinic_grant_role(clinic=other, user=user, role=Role.STAFF)
    profile_claims(offers[:5], token)  # warm: imports, first connection, caches
    if "--cprofile" in sys.argv:
        sort = args[1] if len(args) > 1 else "tottime"
        print(cprofile_claims(offers[5:], token, sort=sort))
        return
    result = profile_claims(offers[5:], token)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
