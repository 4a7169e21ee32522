"""Pins of the Django and psycopg internals the fast paths rely on (common/fastpath/README.md).

Each test names one internal; a Django or psycopg upgrade that renames, removes or reshapes it fails
here, by name, before it fails somewhere in a claim. Fix the fast path (or turn it off with
``FASTPATHS=off``) and update the pin together.
"""

from __future__ import annotations

import importlib
import inspect
from datetime import UTC, datetime

import psycopg
import pytest
import time_machine
from django.db import connection, connections
from django.db.models import Model, Value
from django.db.models.expressions import RawSQL
from django.db.models.sql import InsertQuery
from django.test.utils import CaptureQueriesContext

from common.fastpath import PreparedQuery, insert_sql, prepared_cursor, saved
from scheduling.models import Clinic, TenantGroup

NOW = datetime(2026, 12, 1, tzinfo=UTC)

#: The modules whose ``PreparedQuery`` constants run in production (imported so each registers).
PREPARED_IN = ("scheduling.scoping", "waitlist.dispatch.fence", "waitlist.offers.offers")


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


# --- PreparedQuery: the ORM's compiler and ModelIterable's row handling -------------------------------


def test_django_get_related_populators_takes_klass_info_select_db():
    from django.db.models.query import get_related_populators  # type: ignore[attr-defined]

    assert _params(get_related_populators) == ["klass_info", "select", "db"]


def test_django_compiler_exposes_select_klass_info_annotations_and_converters_after_as_sql(clinic):
    query = Clinic.objects.select_related("tenant_group").annotate(label=Value("x")).filter(ref=clinic.ref)
    compiler = query.query.get_compiler(using="default")
    sql, params = compiler.as_sql()
    assert isinstance(sql, str) and list(params)[-1] == clinic.ref
    assert compiler.klass_info["model"] is Clinic
    start, end = compiler.klass_info["select_fields"][0], compiler.klass_info["select_fields"][-1] + 1
    assert [f[0].target.attname for f in compiler.select[start:end]][:1] == ["id"]
    assert "label" in compiler.annotation_col_map and isinstance(compiler.col_count, int)
    assert _params(compiler.get_converters) == ["expressions"]
    assert _params(compiler.apply_converters) == ["rows", "converters"]


def test_django_model_from_db_takes_db_field_names_values():
    assert _params(Model.from_db.__func__) == ["cls", "db", "field_names", "values"]


@pytest.mark.parametrize("module", PREPARED_IN)
def test_every_prepared_query_replays_the_orms_own_statement(module, db):
    importlib.import_module(module)
    mine = [pq for pq in PreparedQuery.instances if pq.build.__module__ == module]
    assert mine, f"{module} defines no PreparedQuery any more: drop it from PREPARED_IN"
    for prepared in mine:
        compiled = prepared._get("pin")
        values = [-(10**15) if kind is int else "pin" for kind in prepared.kinds]
        sql, params = prepared.build(*values).query.sql_with_params()
        assert compiled.sql == sql and len(compiled.params) == len(params)


def test_a_replayed_row_is_the_orms_instance(clinic):
    def build(clinic_id, ref):
        return (Clinic.objects.select_related("tenant_group")
                .annotate(doubled=RawSQL("%s::bigint * 2", [clinic_id])).filter(ref=ref).order_by("pk")[:1])

    got = PreparedQuery(build, int, str).first(clinic.pk, clinic.ref)
    expected = build(clinic.pk, clinic.ref)[0]
    assert got is not None and got.pk == expected.pk and got.doubled == expected.doubled == clinic.pk * 2
    assert {k: v for k, v in vars(got).items() if k not in ("_state", "_prefetched_objects_cache")} == {
        k: v for k, v in vars(expected).items() if k not in ("_state", "_prefetched_objects_cache")}
    assert got.tenant_group == expected.tenant_group and got._state.db == "default" and not got._state.adding


# --- prepared_cursor: Django's PostgreSQL cursor classes and psycopg's prepared-statement path ----------


def test_django_postgresql_has_a_server_binding_cursor_on_psycopg_cursor():
    from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]

    assert issubclass(ServerBindingCursor, psycopg.Cursor)


def test_django_connection_has_prepare_cursor_wrap_errors_and_health_check(db):
    wrapper = type(connections["default"])
    assert _params(wrapper._prepare_cursor) == ["self", "cursor"]
    assert _params(wrapper.close_if_health_check_failed) == ["self"]
    assert hasattr(connections["default"], "wrap_database_errors")


def test_django_turns_psycopg_automatic_preparing_off(db):
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    assert threshold is None or threshold >= 2**31  # None from Django, or prepared_cursor's "never automatically"


def test_psycopg_execute_takes_prepare_and_send_query_prepared_keeps_its_signature():
    assert "prepare" in _params(psycopg.Cursor.execute)
    assert _params(psycopg.Cursor._send_query_prepared) == ["self", "name", "pgq", "binary"]


def test_a_prepared_statement_is_logged_with_its_values_and_planned_once(clinic):
    sql = "SELECT ref FROM scheduling_clinic WHERE id = %s AND 'pin-prepared' <> ''"
    with CaptureQueriesContext(connection) as logged:
        for _ in range(2):
            with prepared_cursor(connection) as cursor:
                cursor.execute(sql, [clinic.pk])
                assert cursor.fetchone() == (clinic.ref,)
    # Django's query log (``last_executed_query``) reads psycopg's ``_query``, which prepared_cursor keeps.
    assert [q["sql"] for q in logged] == [sql.replace("%s", "$1")] * 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%pin-prepared%"])
        assert cursor.fetchone()[0] == 1


def test_psycopg_postgres_query_parses_with_query2pg_and_dumps_its_values():
    from psycopg._queries import PostgresQuery, _query2pg_nocache

    assert psycopg.Cursor._query_cls is PostgresQuery
    assert _params(_query2pg_nocache) == ["query", "encoding"]
    assert _params(PostgresQuery.dump) == ["self", "vars"]
    assert callable(PostgresQuery._ensure_bytes)


def test_a_long_prepared_statement_with_many_values_is_parsed_once(clinic):
    with prepared_cursor(connection) as cursor:
        parsed = cursor.cursor._query_cls.parsed  # psycopg's query class, with the parsing cached
    sql = f"SELECT ref /* {'x' * 4100} */ FROM scheduling_clinic WHERE {' OR '.join(['id = %s'] * 60)}"
    before = parsed.cache_info()
    for _ in range(3):
        with prepared_cursor(connection) as cursor:
            cursor.execute(sql, [clinic.pk] * 60)
            assert cursor.fetchone() == (clinic.ref,)
    after = parsed.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)


# --- insert_sql / saved: the ORM's INSERT compiler and model state ------------------------------------


def test_django_insert_query_compiles_the_orms_insert(db):
    assert _params(InsertQuery.insert_values)[:3] == ["self", "fields", "objs"]
    assert all(hasattr(f, "generated") for f in TenantGroup._meta.local_concrete_fields)
    group = TenantGroup(name="pinned")
    sql, params = insert_sql(group)
    assert sql.startswith('INSERT INTO "scheduling_tenantgroup"') and group.ref in params
    with connection.cursor() as cursor:
        cursor.execute(sql + " RETURNING id", params)
        saved(group, cursor.fetchone()[0])
    assert group._state.adding is False and group._state.db == "default"
    assert TenantGroup.objects.get(pk=group.pk).ref == group.ref


def test_a_models_insert_text_is_compiled_once_and_its_values_are_the_compilers(db, settings):
    from django.db.models.sql.compiler import SQLInsertCompiler

    from waitlist.models import Vacancy

    settings.FASTPATHS = "on"
    assert _params(SQLInsertCompiler.prepare_value) == ["self", "field", "value"]
    fields = [f for f in Vacancy._meta.local_concrete_fields if not f.primary_key and not f.generated]
    first = Vacancy(vacancy_key="pin:1", clinic_id=1, tenant_group_id=1, practitioner_id=1, treatment_id=1,
                    starts_at=NOW, ends_at=NOW, excluded_patient_id=None)
    insert_sql(first)  # compiles the model's text
    row = Vacancy(vacancy_key="pin:2", clinic_id=1, tenant_group_id=1, practitioner_id=1, treatment_id=1,
                  starts_at=NOW, ends_at=NOW, excluded_patient_id=None)
    with time_machine.travel(NOW, tick=False):  # auto_now columns: the same instant in both
        sql, params = insert_sql(row)
        query = InsertQuery(Vacancy)
        query.insert_values(fields, [row])
        ((orm_sql, orm_params),) = query.get_compiler(connection=connection).as_sql()  # pre_save again
    assert sql == orm_sql and [str(p) for p in params] == [str(p) for p in orm_params]
    assert row.ref and row.created_at is not None  # refs and auto_now_add filled in on the object, as save does


def test_an_insert_whose_first_row_holds_an_expression_is_not_kept_as_the_models_text(db, settings):
    from django.db.models.functions import Lower

    from common.fastpath import sql as fastpath_sql

    settings.FASTPATHS = "on"
    fastpath_sql._PLAIN_INSERTS.pop(TenantGroup, None)
    sql, params = insert_sql(TenantGroup(name=Lower(Value("MIXED"))))
    assert "LOWER" in sql and TenantGroup not in fastpath_sql._PLAIN_INSERTS
    plain, _ = insert_sql(TenantGroup(name="plain"))
    assert "LOWER" not in plain and fastpath_sql._PLAIN_INSERTS[TenantGroup] == plain


# --- redis_client: Django's Redis cache client ----------------------------------------------------------


def test_django_redis_cache_client_builds_clients_from_its_pools():
    import redis
    from django.core.cache import cache
    from django.core.cache.backends.redis import RedisCacheClient

    assert isinstance(cache._cache, RedisCacheClient)
    assert _params(RedisCacheClient._get_connection_pool) == ["self", "write"]
    assert _params(RedisCacheClient.get_client) == ["self", "key", "write"]
    assert cache._cache._client is redis.Redis
