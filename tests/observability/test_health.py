"""/healthz and /readyz: unauthenticated, bare words only, 503 when a dependency is down."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone

from observability import health
from tests.support.servers import free_port
from waitlist.models import JobRun

CHECKS = {"database", "broker", "beat", "migrations"}


def readyz() -> tuple[int, dict]:
    response = Client().get("/readyz")
    return response.status_code, json.loads(response.content)


@pytest.fixture
def beat_ran(db):
    JobRun.objects.create(name="expire", last_run_at=timezone.now(), last_result={})


def test_healthz_answers_without_touching_the_database():
    # No db fixture: any database access here would raise.
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ok"}


def test_readyz_is_ok_when_everything_is_up(beat_ran):
    status, body = readyz()
    assert status == 200
    assert body == {"status": "ok", "checks": {name: "ok" for name in CHECKS}}


def test_readyz_fails_with_the_broker_down(beat_ran, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    status, body = readyz()
    assert status == 503
    assert body["checks"]["broker"] == "down"
    assert body["checks"]["database"] == "ok"


def test_readyz_fails_with_the_database_down(beat_ran):
    """Another thread gets its own connection; pointing it at a closed port is a database that is down."""
    settings_dict = connections.settings["default"]
    original_port = settings_dict.get("PORT")
    result: dict = {}

    def probe():
        try:
            result["answer"] = readyz()
        finally:
            connections.close_all()

    settings_dict["PORT"] = str(free_port())
    try:
        thread = threading.Thread(target=probe)
        thread.start()
        thread.join(timeout=60)
    finally:
        settings_dict["PORT"] = original_port
    status, body = result["answer"]
    assert status == 503
    assert body["checks"]["database"] == "down"
    assert body["checks"]["broker"] == "ok"
    assert set(body["checks"]) == CHECKS


def test_readyz_reports_a_stale_beat(db, settings):
    JobRun.objects.create(name="expire", last_run_at=timezone.now() - timedelta(minutes=30), last_result={})
    settings.READYZ_BEAT_MAX_AGE_SECONDS = 300
    status, body = readyz()
    assert (status, body["checks"]["beat"]) == (503, "stale")


def test_readyz_reports_a_beat_that_never_ran(db):
    status, body = readyz()
    assert (status, body["checks"]["beat"]) == (503, "never")


def test_readyz_reports_pending_migrations(beat_ran, monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(health, "_migrations_ok", False)
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("app", "0099_pending")])
    status, body = readyz()
    assert (status, body["checks"]["migrations"]) == (503, "pending")


def test_readyz_reveals_no_error_text_or_host(beat_ran, settings):
    settings.CELERY_BROKER_URL = f"redis://secret-user:secret-pass@127.0.0.1:{free_port()}/0"
    response = Client().get("/readyz")
    text = response.content.decode()
    for leak in ("secret", "127.0.0.1", "Error", "redis"):
        assert leak not in text
