"""A PreparedQuery sends the ORM's statement, byte for byte, and builds the same instances (issue 15)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Value
from django.db.models.expressions import RawSQL
from django.test.utils import CaptureQueriesContext

from common.fastpath import PreparedQuery
from scheduling.models import Clinic


def _clinic_query(clinic_id, ref):
    return (
        Clinic.objects.select_related("tenant_group")
        .annotate(doubled=RawSQL("%s::bigint * 2", [clinic_id]), label=Value("x"))
        .filter(ref=ref)
        .order_by("pk")[:1]
    )


def test_the_statement_and_the_instance_are_the_orms(clinic):
    prepared: PreparedQuery[Clinic] = PreparedQuery(_clinic_query, int, str)
    with CaptureQueriesContext(connection) as orm_sql:
        expected = list(_clinic_query(clinic.pk, clinic.ref))[0]
    with CaptureQueriesContext(connection) as prepared_sql:
        got = prepared.first(clinic.pk, clinic.ref)
    sql, params = _clinic_query(clinic.pk, clinic.ref).query.sql_with_params()
    compiled = prepared._get(None)
    assert compiled.sql == sql and len(prepared_sql) == len(orm_sql) == 1
    assert [p for p, slot in zip(compiled.params, compiled.slots, strict=True) if slot is None] == [params[1]]
    assert got is not None and got is not expected
    assert {k: v for k, v in got.__dict__.items() if k != "_state"} == {
        k: v for k, v in expected.__dict__.items() if k != "_state"
    }
    assert got.doubled == clinic.pk * 2 and got.label == "x"
    assert got._state.adding is False and got._state.db == "default"
    with CaptureQueriesContext(connection) as more:
        assert got.tenant_group.ref == clinic.tenant_group.ref  # read with it, no second statement
        assert got.settings == expected.settings  # a JSON column went through the ORM's converters
    assert len(more) == 0


def test_new_values_each_call_and_none_when_nothing_matches(clinic, other_tenant_clinic):
    prepared: PreparedQuery[Clinic] = PreparedQuery(_clinic_query, int, str)
    first = prepared.first(clinic.pk, clinic.ref)
    second = prepared.first(other_tenant_clinic.pk, other_tenant_clinic.ref)
    assert first is not None and first.pk == clinic.pk and first.doubled == clinic.pk * 2
    assert second is not None and second.pk == other_tenant_clinic.pk and second.doubled == other_tenant_clinic.pk * 2
    assert prepared.first(clinic.pk, "cl_missing") is None
    assert prepared.first(clinic.pk, "x'; DROP TABLE scheduling_clinic; --") is None  # a parameter, not SQL


def test_each_key_compiles_its_own_statement(clinic):
    built = []

    def build(clinic_id, ref):
        built.append(ref)
        return _clinic_query(clinic_id, ref)

    prepared: PreparedQuery[Clinic] = PreparedQuery(build, int, str)
    for _ in range(3):
        prepared.first(clinic.pk, clinic.ref, key="a")
    prepared.first(clinic.pk, clinic.ref, key="b")
    assert len(built) == 2  # once per key, with sentinels, never with a request's values
    assert clinic.ref not in built


def test_an_argument_that_does_not_reach_the_parameters_is_refused(db):
    prepared: PreparedQuery[Clinic] = PreparedQuery(lambda clinic_id, ref: Clinic.objects.filter(ref="fixed"), int, str)
    with pytest.raises(ValueError, match="do not reach"):
        prepared.first(1, "x")


def test_the_clinic_scope_still_hides_other_tenants_like_missing_ones(staff_client, clinic, other_tenant_clinic):
    foreign = staff_client.get(f"/api/v1/clinics/{other_tenant_clinic.ref}/treatments/")
    missing = staff_client.get("/api/v1/clinics/cl_nope/treatments/")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.content == missing.content
    assert staff_client.get(f"/api/v1/clinics/{clinic.ref}/treatments/").status_code == 200


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_postgresql_plans_the_statement_once_per_connection(clinic):
    prepared: PreparedQuery[Clinic] = PreparedQuery(_clinic_query, int, str)
    for _ in range(3):
        assert prepared.first(clinic.pk, clinic.ref) is not None
    mine = [s for s in _prepared_statements() if '"doubled"' in s]
    assert len(mine) == 1 and "$1" in mine[0]  # one server-side statement, the values bound to it


def test_behind_a_transaction_mode_pooler_nothing_is_prepared(clinic, monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", True)
    prepared: PreparedQuery[Clinic] = PreparedQuery(_clinic_query, int, str)
    got = prepared.first(clinic.pk, clinic.ref)
    assert got is not None and got.doubled == clinic.pk * 2
    assert not [s for s in _prepared_statements() if '"doubled"' in s]
