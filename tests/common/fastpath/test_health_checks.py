"""Issue 15: the per-request connection health check (SELECT 1) only after the connection sat idle.

Outside a test transaction (``transaction=True``) with a persistent connection, as under gunicorn:
requests are begun and ended with Django's own request signals, and the SELECT 1 is seen on the
psycopg connection itself (Django's ``is_usable`` bypasses its cursor wrappers).
"""

from __future__ import annotations

import time

import pytest
from django.core.signals import request_finished, request_started
from django.db import connection, connections

from common.fastpath import health_checks as dbhealth

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def persistent(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", True)
    connection.close()
    connection.ensure_connection()
    connection.close_at = time.monotonic() + 60
    monkeypatch.delattr(connection, "_cw_request_done_at", raising=False)
    # As in a web worker, Django's close_old_connections runs first (connected when django.db is
    # imported); Django's test client disconnects and reconnects it around each request, which puts it
    # last. Put ours back after it (the other order only ever adds a check: the safe direction).
    dbhealth.connect_signals_last()
    yield
    connection.close()


@pytest.fixture
def idle(monkeypatch):
    """Move the health check's clock forward by hand (``idle(seconds)``)."""
    now = [1_000.0]
    monkeypatch.setattr(dbhealth, "clock", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def _checks_in_one_request(_monkeypatch=None) -> int:
    conn = connections["default"]
    calls = []
    real = type(conn).is_usable
    conn.is_usable = lambda: calls.append(1) or real(conn)
    try:
        request_started.send(sender=None)
        with conn.cursor() as cursor:
            cursor.execute("SELECT 2")
        request_finished.send(sender=None)
    finally:
        del conn.is_usable
    return len(calls)


def test_every_request_is_checked_when_the_window_is_zero(settings, persistent, monkeypatch):
    settings.DATABASE_HEALTH_CHECK_IDLE_SECONDS = 0
    assert _checks_in_one_request(monkeypatch) == 1
    assert _checks_in_one_request(monkeypatch) == 1


def test_a_connection_just_used_skips_the_check_an_idle_one_does_not(settings, persistent, monkeypatch, idle):
    settings.DATABASE_HEALTH_CHECK_IDLE_SECONDS = 30
    assert _checks_in_one_request(monkeypatch) == 1  # never finished a request: checked
    idle(29)
    assert _checks_in_one_request(monkeypatch) == 0  # finished one within the window: skipped
    idle(31)
    assert _checks_in_one_request(monkeypatch) == 1  # idle longer than the window: checked


def test_a_broken_idle_connection_is_replaced_before_the_first_query(settings, persistent, monkeypatch, idle):
    settings.DATABASE_HEALTH_CHECK_IDLE_SECONDS = 30
    _checks_in_one_request(monkeypatch)
    pid = connection.connection.info.backend_pid
    idle(31)
    with connections["default"].cursor():
        pass
    import psycopg

    with psycopg.connect(**connection.get_connection_params()) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    request_started.send(sender=None)
    with connection.cursor() as cursor:  # the check found it dead: a new connection, no error
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid
    request_finished.send(sender=None)
