"""Observability's statements outside the ORM, one typed function each, with why each is raw SQL.

- ``database_round_trip``: readiness's probe, a statement that reads no table (the ORM has none to write);
  Django's ``connection.is_usable()`` sends the same ``SELECT 1`` but swallows the error, which readiness
  logs once by name (``common.degrade``).

The invariant checks (``observability.invariants``) are querysets: the same statement shapes as their SQL
had (``EXISTS``, ``GROUP BY … HAVING``), run only after fault tests, by the soak run and after benchmarks.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections


def database_round_trip() -> None:
    """One round trip to the default database through Django's cursor (its health check and error wrapping
    included); raises what the database or the driver raised."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
