"""Interop's statements outside the ORM, one typed function each, with why each is raw SQL.

- ``identifier_lock``: a transaction-scoped advisory lock (``pg_advisory_xact_lock``), a PostgreSQL function
  the ORM has no word for; it serialises two PUTs of one EHR identifier that has no row yet to lock.
"""

from __future__ import annotations

from django.db import connection


def identifier_lock(key: str) -> None:
    """Wait for, then hold until the transaction ends, the advisory lock on ``key``'s hash."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 24))", [key])
