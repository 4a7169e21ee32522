"""A request whose PostgreSQL connection breaks (a failover) is replayed once when safe, else 503 + Retry-After
(common/dbloss.py). The connection is really lost: a trigger makes the server end the request's own backend
(``pg_terminate_backend(pg_backend_pid())``) the first time a row is inserted, counted by a sequence (which a
rollback does not undo)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from common.models import CommandReceipt
from scheduling.models import Patient
from tests import factories as f
from tests.conftest import token_client

pytestmark = pytest.mark.django_db(transaction=True)


def _admin_conninfo() -> str:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v not in (None, "")})


@pytest.fixture
def drop_first_insert_into():
    """``drop(table)``: the first INSERT into ``table`` kills its own connection; removed after the test."""
    installed: list[str] = []

    def drop(table: str) -> None:
        with psycopg.connect(_admin_conninfo(), autocommit=True) as admin:
            admin.execute("CREATE SEQUENCE IF NOT EXISTS test_drop_once")
            admin.execute(
                "CREATE OR REPLACE FUNCTION test_drop_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF nextval('test_drop_once') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;"
                " RETURN NEW; END $$")
            admin.execute(f"CREATE TRIGGER test_drop_once BEFORE INSERT ON {table} "
                          "FOR EACH ROW EXECUTE FUNCTION test_drop_once()")
        installed.append(table)

    yield drop
    with psycopg.connect(_admin_conninfo(), autocommit=True) as admin:
        for table in installed:
            admin.execute(f"DROP TRIGGER IF EXISTS test_drop_once ON {table}")
        admin.execute("DROP FUNCTION IF EXISTS test_drop_once()")
        admin.execute("DROP SEQUENCE IF EXISTS test_drop_once")


@pytest.fixture
def world():
    clinic = f.ClinicFactory()
    return clinic, token_client(f.user_with_role(clinic, "STAFF", username="dbloss-staff"))


def test_an_idempotent_command_whose_connection_broke_is_replayed_once_and_runs_once(world, drop_first_insert_into):
    clinic, client = world
    drop_first_insert_into("scheduling_patient")
    response = client.post(f"/api/v1/clinics/{clinic.ref}/patients/", {"display_name": "Replayed", "language": "en"},
                           format="json", HTTP_IDEMPOTENCY_KEY="replay-me")
    assert response.status_code == 201
    assert list(Patient.objects.filter(clinic=clinic).values_list("ref", flat=True)) == [response.json()["ref"]]
    assert CommandReceipt.objects.filter(key="replay-me").count() == 1


def test_a_command_without_a_key_whose_connection_broke_is_503_with_retry_after_and_writes_nothing(
    world, drop_first_insert_into
):
    clinic, client = world
    drop_first_insert_into("scheduling_patient")
    response = client.post(f"/api/v1/clinics/{clinic.ref}/patients/", {"display_name": "Lost", "language": "en"},
                           format="json")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["code"] == "SERVICE_UNAVAILABLE"
    assert not Patient.objects.filter(clinic=clinic).exists()


def test_a_read_whose_connection_was_terminated_is_replayed_on_a_new_connection(world, settings):
    clinic, client = world
    connection.ensure_connection()
    connection.close_at = None  # kept across the request, as a web process's persistent connection
    settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
    connection.health_check_enabled = False
    with psycopg.connect(_admin_conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
    response = client.get(f"/api/v1/clinics/{clinic.ref}/practitioners/")
    assert response.status_code == 200


def test_a_refusal_from_postgresql_is_not_taken_for_connection_loss():
    from django.db import IntegrityError, OperationalError

    from common.dbloss import connection_lost

    lock_timeout = OperationalError("canceling statement due to lock timeout")
    lock_timeout.__cause__ = psycopg.errors.LockNotAvailable("lock timeout")
    assert not connection_lost(lock_timeout)
    assert not connection_lost(IntegrityError("duplicate key"))
    assert connection_lost(OperationalError("server closed the connection unexpectedly"))
