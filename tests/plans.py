"""Plans of a statement as ``common.fastpath.prepared_cursor`` runs it: a server-side prepared statement, for
which PostgreSQL may switch to a generic plan (no parameter values) after five executions (PG15 has no
``EXPLAIN (GENERIC_PLAN)``: the statement is prepared and run, then ``EXPLAIN EXECUTE``\\d)."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connection
from psycopg._queries import PostgresQuery  # the placeholder conversion psycopg applies when it prepares
from psycopg.adapt import Transformer

from common.fastpath import prepared_cursor


def prepared_plans(sql: str, params: Any, *, runs: int = 6, analyze: bool = False) -> dict[str, Any]:
    """Run ``sql`` ``runs`` times through ``prepared_cursor`` (as the service does), then ``EXPLAIN EXECUTE`` its
    prepared statement: ``auto`` (what PostgreSQL chose, ``plan_cache_mode`` as configured), ``generic`` and
    ``custom`` (forced); and ``generic_plans``/``custom_plans``, PostgreSQL's counts of each for it."""
    with prepared_cursor(connection) as cursor:
        for _ in range(runs):
            cursor.execute(sql, params)
            cursor.fetchall()
    raw = connection.connection
    pgq = PostgresQuery(Transformer(raw))
    pgq.convert(sql, params)
    order = pgq._order  # type: ignore[attr-defined]
    values = [params[name] for name in order] if order is not None else list(params)
    out: dict[str, Any] = {}
    with psycopg.ClientCursor(raw) as cur:
        cur.execute("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s",
                    [pgq.query.decode()])
        name, out["generic_plans"], out["custom_plans"] = cur.fetchone()
        explain = "EXPLAIN (ANALYZE, BUFFERS) " if analyze else "EXPLAIN "
        execute = f"{explain}EXECUTE {name}({', '.join(['%s'] * len(values))})"
        for mode in ("auto", "force_generic_plan", "force_custom_plan"):
            if mode != "auto":
                cur.execute(f"SET plan_cache_mode = {mode}")
            try:
                cur.execute(execute, values)
                out[mode.split("_")[1] if mode != "auto" else mode] = "\n".join(r[0] for r in cur.fetchall())
            finally:
                cur.execute("RESET plan_cache_mode")
    return out
