"""/healthz (liveness) and /readyz (readiness, as Kubernetes means them): unauthenticated, bare words
and ages only; 503 only when *this* process cannot serve (database, migrations). Beat, workers and the
broker are reported in the body and never gate it."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
import time_machine
from django.db import connections
from django.test import Client
from django.utils import timezone

from observability import components, health
from tests.support.servers import free_port
from waitlist.models import JobRun

CHECKS = {"database", "migrations"}
BACKGROUND = {"broker", "beat", "workers", "jobs"}


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
    components.beat_seen("beat@test", sent=True)
    components.worker_seen("w1@test")
    status, body = readyz()
    assert status == 200
    assert body["status"] == "ok" and body["checks"] == {name: "ok" for name in CHECKS}
    assert {name: part["state"] for name, part in body["background"].items()} == dict.fromkeys(BACKGROUND, "ok")


def test_readyz_is_ready_right_after_start_before_beat_or_a_worker_ever_ran(db):
    status, body = readyz()
    assert status == 200
    assert body["background"]["beat"] == {"state": "never"}
    assert body["background"]["workers"] == {"state": "never"}
    assert body["background"]["jobs"] == {"state": "never"}


def test_readyz_stays_ready_with_the_broker_down_and_says_so(beat_ran, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    status, body = readyz()
    assert status == 200
    assert body["background"]["broker"] == {"state": "down"}
    assert body["checks"]["database"] == "ok"


def test_readyz_stays_ready_with_beat_stopped_and_reports_its_age(db, settings):
    settings.COMPONENT_STALE_SECONDS = 90
    with time_machine.travel(timezone.now() - timedelta(minutes=10), tick=False):
        components.beat_seen("beat@test", sent=True)
    status, body = readyz()
    assert status == 200
    beat = body["background"]["beat"]
    assert beat["state"] == "stale" and 590 <= beat["age_seconds"] <= 700
    assert 590 <= beat["last_send_age_seconds"] <= 700


def test_readyz_says_when_beat_ticks_but_cannot_send(db):
    components.beat_seen("beat@test", sent=True)
    components.beat_seen("beat@test", sent=False)
    status, body = readyz()
    assert status == 200 and body["background"]["beat"]["state"] == "cannot_send"


def test_readyz_reports_workers_gone_quiet_with_the_youngest_age(db, settings):
    settings.COMPONENT_STALE_SECONDS = 90
    with time_machine.travel(timezone.now() - timedelta(minutes=5), tick=False):
        components.worker_seen("w1@test")
    with time_machine.travel(timezone.now() - timedelta(minutes=3), tick=False):
        components.worker_seen("w2@test")
    status, body = readyz()
    assert status == 200
    workers = body["background"]["workers"]
    assert workers["state"] == "stale" and 170 <= workers["age_seconds"] <= 200


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
    assert body["background"]["broker"] == {"state": "ok"}
    assert set(body["checks"]) == CHECKS and set(body["background"]) == BACKGROUND


def test_readyz_reports_stale_beat_jobs_without_failing(db, settings):
    JobRun.objects.create(name="expire", last_run_at=timezone.now() - timedelta(minutes=30), last_result={})
    settings.READYZ_BEAT_MAX_AGE_SECONDS = 300
    status, body = readyz()
    assert status == 200
    assert body["background"]["jobs"]["state"] == "stale"


def test_readyz_reports_pending_migrations(beat_ran, monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(health, "_migrations_ok", False)
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("app", "0099_pending")])
    status, body = readyz()
    assert (status, body["checks"]["migrations"]) == (503, "pending")


def test_readyz_reveals_no_error_text_or_host(beat_ran, settings):
    components.worker_seen("celery@secret-host-name")
    settings.CELERY_BROKER_URL = f"redis://secret-user:secret-pass@127.0.0.1:{free_port()}/0"
    response = Client().get("/readyz")
    text = response.content.decode()
    for leak in ("secret", "127.0.0.1", "Error", "redis"):
        assert leak not in text


def test_a_down_broker_is_probed_at_most_once_per_interval(beat_ran, settings, monkeypatch):
    """A probe must answer within its timeout during the outage: the broker's answer is reused for a while."""
    from kombu import Connection

    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/9"
    settings.READYZ_BROKER_CHECK_EVERY_SECONDS = 60
    attempts = []
    original = Connection.ensure_connection

    def counted(self, *args, **kwargs):
        attempts.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Connection, "ensure_connection", counted)
    answers = [readyz() for _ in range(3)]
    assert [status for status, _ in answers] == [200, 200, 200]
    assert {body["background"]["broker"]["state"] for _, body in answers} == {"down"}
    assert len(attempts) == 1
