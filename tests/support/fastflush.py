"""The wipe after a transactional test (``transaction=True``, ``transactional_db``, ``live_server``),
without Django's cost and with Django's result.

Django's ``TransactionTestCase`` ends every test with ``manage.py flush``: one ``TRUNCATE`` of every
table (about 30 ms a table here: each truncated table and index gets new files), then the
``post_migrate`` signal re-creates the content types and permissions it has just truncated. That is
1.5-6 s a test on a loaded machine, for tables that almost all hold nothing.

:func:`wipe` leaves the same thing behind (every table empty but the ones ``migrate`` fills):

* one statement finds the tables that hold rows (and how many, up to ``TRUNCATE_ABOVE``);
* the static tables (``django_migrations``, content types, permissions) are compared with what the
  cloned database started with (:func:`remember_static`); if a test changed them, Django's own flush
  runs, exactly as before, and the new state is remembered;
* otherwise, in one transaction with every (deferrable) foreign key deferred, the few big tables (many
  rows, or grown past ``TRUNCATE_BYTES`` with dead rows and index pages) are ``TRUNCATE``d (with
  ``CASCADE``: the tables referencing them go too) and the rest ``DELETE``d. Sequences are not reset,
  as Django's flush does not either.
"""

from __future__ import annotations

from django.core.management import call_command
from django.db import connections, transaction
from django.test import TransactionTestCase

#: Tables ``migrate`` fills and ``flush`` re-fills through ``post_migrate``; kept unless a test changed them.
STATIC_TABLES = ("django_migrations", "django_content_type", "auth_permission")
#: Above this many rows a table is truncated (cheaper than deleting row by row); below, deleted.
TRUNCATE_ABOVE = 2000
#: Above this size (table, indexes, TOAST) a table is truncated even when it holds few or no live rows:
#: what rolled-back ``db`` tests and deleted rows leave behind (dead rows, index pages) would otherwise
#: pile up for the whole run, and the planner reads those sizes (tests/waitlist/test_matcher.py EXPLAINs
#: its page query on 40,000 rows: a bloated ``wl_entry_match`` turns its ordered index scan into a sort).
#: Django's flush truncated every table after every transactional test, which also cleared them.
TRUNCATE_BYTES = 512 * 1024

_static: dict[str, tuple] = {}


def _tables(connection) -> list[str]:
    return sorted(connection.introspection.django_table_names(only_existing=True, include_views=False))


def _static_state(connection) -> tuple:
    qn = connection.ops.quote_name
    sql = " UNION ALL ".join(f"SELECT %s, count(*), max(id) FROM {qn(t)}" for t in STATIC_TABLES)
    with connection.cursor() as cursor:
        cursor.execute(sql, STATIC_TABLES)
        return tuple(sorted(cursor.fetchall()))


def remember_static(alias: str) -> None:
    """Record the static tables' state of this worker's freshly cloned database."""
    _static[alias] = _static_state(connections[alias])


def _filled(connection) -> list[tuple[str, int, int]]:
    """Each non-static table that holds rows or has grown: its row count (up to ``TRUNCATE_ABOVE + 1``)
    and its size in bytes (table, indexes, TOAST)."""
    qn = connection.ops.quote_name
    tables = [t for t in _tables(connection) if t not in STATIC_TABLES]
    counts = " UNION ALL ".join(
        f"SELECT %s, (SELECT count(*) FROM (SELECT 1 FROM {qn(t)} LIMIT {TRUNCATE_ABOVE + 1}) AS s),"
        f" pg_total_relation_size(%s::regclass)"
        for t in tables
    )
    params = [value for t in tables for value in (t, qn(t))]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t, n, size FROM ({counts}) AS filled(t, n, size) WHERE n > 0 OR size > {TRUNCATE_BYTES}",
            params,
        )
        return cursor.fetchall()


def wipe(alias: str) -> None:
    connection = connections[alias]
    if alias not in _static or _static_state(connection) != _static[alias]:
        call_command("flush", verbosity=0, interactive=False, database=alias, reset_sequences=False)
        remember_static(alias)
        return
    filled = _filled(connection)
    if not filled:
        return
    qn = connection.ops.quote_name
    big = [qn(t) for t, n, size in filled if n > TRUNCATE_ABOVE or size > TRUNCATE_BYTES]
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        if big:  # before any DELETE: TRUNCATE refuses tables with pending trigger events
            cursor.execute(f"TRUNCATE {', '.join(big)} CASCADE")
        for table, n, _size in filled:
            if n and qn(table) not in big:
                cursor.execute(f"DELETE FROM {qn(table)}")


_django_fixture_teardown = TransactionTestCase._fixture_teardown


def _fixture_teardown(self) -> None:
    if self.available_apps is not None or self.serialized_rollback:
        return _django_fixture_teardown(self)
    for alias in self._databases_names(include_mirrors=False):
        wipe(alias)


def install() -> None:
    """Make every transactional test end with :func:`wipe` instead of ``flush``."""
    TransactionTestCase._fixture_teardown = _fixture_teardown
