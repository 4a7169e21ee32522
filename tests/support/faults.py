"""Fault injection against real servers, scoped to this test's own resources.

``kill_connection`` ends one backend of the test database with ``pg_terminate_backend`` (what a
PostgreSQL restart does to a client), never the shared server: other engineers use it.
"""

from __future__ import annotations

import psycopg
from django.db import connection


def admin_dsn() -> str:
    s = connection.settings_dict
    return psycopg.conninfo.make_conninfo(
        host=s.get("HOST") or "127.0.0.1", port=s.get("PORT") or 5432, user=s.get("USER") or "postgres",
        password=s.get("PASSWORD") or None, dbname=s["NAME"],
    )


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def kill_connection(pid: int) -> None:
    """Terminate one backend of the test database from a separate connection."""
    with psycopg.connect(admin_dsn(), autocommit=True) as admin:
        row = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s AND datname = current_database()",
            [pid],
        ).fetchone()
    assert row and row[0], f"backend {pid} of the test database was not terminated"


def reconnect() -> None:
    """What Django does between requests: drop the broken connection so the next query opens a new one."""
    connection.close()
