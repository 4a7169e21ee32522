"""A queryset compiled once per process and run many times with new values (issue 15).

Building and compiling a rich queryset (``select_related`` over four tables, subquery annotations,
``FOR NO KEY UPDATE OF``) costs several milliseconds of Python per call, more than PostgreSQL spends
running it: the claim's lock statement was ~5 ms of ORM work per request. ``PreparedQuery`` builds the
queryset once with sentinel values, keeps the compiled SQL and the compiler's row layout, and per call
substitutes the real values into the parameter list and turns the row into model instances exactly as
``ModelIterable`` does (the same converters, ``from_db``, related populators and annotations). The SQL
sent is byte for byte the ORM's; only the compiling is skipped.

Only values that reach the parameter list unchanged can be substituted (a ref, a primary key, a
``RawSQL`` parameter); ``build`` must use each argument as such. The compiled form is keyed on
``key`` (e.g. the decision provider, whose expression is part of the SQL), so swapping it recompiles.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Hashable
from typing import Any, ClassVar, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators  # type: ignore[attr-defined]

from .switch import enabled

_sentinel_ids = itertools.count(1)
M = TypeVar("M", bound=Model)


class _Sentinel:
    """A distinctive value per argument: a negative integer (a primary key) and a string (a ref)."""

    def __init__(self) -> None:
        n = next(_sentinel_ids)
        self.number = -(10**15) - n
        self.text = f"\x1fprepared-sentinel-{n}\x1f"


def behind_transaction_pooler(connection) -> bool:
    """``DATABASE_POOLER_TRANSACTION_MODE``: consecutive transactions may run on different server connections,
    so nothing may live in the session between them (prepared statements, server-side cursors, session locks)."""
    return bool(connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"))


def prepared_cursor(connection):
    """A cursor whose statements PostgreSQL parses and plans once per connection (a server-side prepared
    statement, psycopg's ``prepare=True``), for the few statements the hot path runs with fixed text.

    Django's cursors bind parameters on the client, so PostgreSQL parses and plans every statement
    again; the claim's lock statement (five tables, two subqueries) costs more to plan than to run.
    Behind a transaction-mode pooler (``DATABASE_POOLER_TRANSACTION_MODE``) a prepared statement may
    not find its server connection again, so there this is Django's ordinary cursor, as it is with the
    fast paths off (``FASTPATHS=off``). It is Django's cursor wrapper either way: execute wrappers and
    query logging see every statement.
    """
    if not enabled() or connection.vendor != "postgresql" or behind_transaction_pooler(connection):
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        # Django turns psycopg's automatic preparing off (``prepare_threshold=None``), which also refuses
        # an explicit ``prepare=True``; a threshold no statement reaches turns the explicit one back on.
        # Django's own cursors bind on the client and are never prepared whatever the threshold.
        raw.prepare_threshold = _NEVER_AUTOMATICALLY
    with connection.wrap_database_errors:  # what ``connection.cursor()`` does, with another psycopg cursor
        return connection._prepare_cursor(_preparing_cursor_class()(raw))


_NEVER_AUTOMATICALLY = 2**31


@functools.cache
def _fixed_text_query_class():
    """psycopg's ``PostgresQuery`` whose placeholder parsing is cached for any statement length and parameter
    count. psycopg caches it only for statements of at most 4,096 bytes and 50 parameters (an ORM's statements
    vary); a prepared statement's text is fixed, and the matcher's page (5 KB) and promotion's statement (64
    parameters) were parsed again on every dispatch (3 % of the worker's CPU in the storm)."""
    from psycopg._compat import Template
    from psycopg._queries import PostgresQuery, _query2pg_nocache

    parse = functools.lru_cache(maxsize=256)(_query2pg_nocache)

    class FixedTextQuery(PostgresQuery):
        parsed = parse

        def convert(self, query, vars):
            if vars is None or isinstance(query, Template):
                return super().convert(query, vars)
            query = self._ensure_bytes(query)
            self.query, self._want_formats, self._order, self._parts = parse(query, self._tx.encoding)
            self.dump(vars)

    return FixedTextQuery


@functools.cache
def _preparing_cursor_class():
    from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]

    class PreparingCursor(ServerBindingCursor):
        _query_cls = _fixed_text_query_class()

        def execute(self, query, params=None, **kwargs):
            kwargs.setdefault("prepare", True)
            return super().execute(query, params, **kwargs)

        def _send_query_prepared(self, name, pgq, *, binary=None):
            # psycopg records the statement it sent only when not prepared; Django's query log
            # (``last_executed_query``) reads that record, so keep it for prepared ones too.
            super()._send_query_prepared(name, pgq, binary=binary)
            self._query = pgq

    return PreparingCursor


class _Compiled:
    def __init__(self, queryset: QuerySet, sentinels: list[Any], using: str) -> None:
        compiler = queryset.query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        self.sql = sql
        self.params = list(params)
        #: per parameter position: which argument goes there (None: a constant of the query).
        self.slots: list[int | None] = []
        for value in self.params:
            slot = None
            for i, sentinel in enumerate(sentinels):
                if (isinstance(value, int) and value == sentinel) or (isinstance(value, str) and value == sentinel):
                    slot = i
            self.slots.append(slot)
        missing = set(range(len(sentinels))) - {s for s in self.slots if s is not None}
        if missing:
            raise ValueError(f"PreparedQuery: arguments {sorted(missing)} do not reach the SQL parameters")
        select, klass_info = compiler.select, compiler.klass_info
        self.annotation_col_map = compiler.annotation_col_map or {}
        self.model_cls = klass_info["model"]
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        self.model_slice = slice(start, end)
        self.init_list = [f[0].target.attname for f in select[start:end]]
        self.related_populators = get_related_populators(klass_info, select, using)
        self.compiler = compiler
        self.converters = compiler.get_converters([s[0] for s in select[0 : compiler.col_count]])


class PreparedQuery(Generic[M]):
    """``build(*args)`` → a queryset selecting model rows (at most the first is used); ``first(*values)``
    runs it with ``values`` in place of ``args`` and returns the first instance or None.

    ``kinds``: per argument, ``int`` (a primary key: a sentinel integer is passed to ``build``) or
    ``str`` (a ref or other text)."""

    #: Every instance made (module constants): the internals tests replay each one against the ORM.
    instances: ClassVar[list[PreparedQuery]] = []

    def __init__(self, build: Callable[..., QuerySet[M]], *kinds: type, using: str = DEFAULT_DB_ALIAS) -> None:
        PreparedQuery.instances.append(self)
        self.build = build
        self.kinds = kinds
        self.using = using
        self._compiled: dict[Hashable, _Compiled] = {}
        self._lock = threading.Lock()

    def _get(self, key: Hashable) -> _Compiled:
        compiled = self._compiled.get(key)
        if compiled is None:
            sentinels = [_Sentinel() for _ in self.kinds]
            values = [s.number if kind is int else s.text for s, kind in zip(sentinels, self.kinds, strict=True)]
            compiled = _Compiled(self.build(*values), values, self.using)
            with self._lock:
                self._compiled[key] = compiled
        return compiled

    def first(self, *values: Any, key: Hashable = None) -> M | None:
        if not enabled():
            # The ORM's own road: the same statement, compiled for this call (all its rows fetched, as
            # below, so a locking statement locks the same rows).
            return next(iter(self.build(*values).using(self.using)), None)
        compiled = self._get(key)
        params = [
            p if slot is None else (type(p)(values[slot]) if isinstance(p, int) else values[slot])
            for p, slot in zip(compiled.params, compiled.slots, strict=True)
        ]
        with prepared_cursor(connections[self.using]) as cursor:
            cursor.execute(compiled.sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        if compiled.converters:
            row = next(iter(compiled.compiler.apply_converters([row], compiled.converters)))
        obj = compiled.model_cls.from_db(self.using, compiled.init_list, row[compiled.model_slice])
        for populator in compiled.related_populators:
            populator.populate(row, obj)
        for attr, pos in compiled.annotation_col_map.items():
            setattr(obj, attr, row[pos])
        return obj

    def clear(self) -> None:
        with self._lock:
            self._compiled.clear()
