"""Issue 43: readiness and beat through a broker outage, against a private ``redis-server`` on a loopback port
that the test stops and starts again. Workers are not reported ``ok`` while no task can reach them; the
outage is logged once when it starts and once when it ends (not a traceback per probe); and beat's first
successful send after it sends reconcile at once, which dispatches what the outage left undispatched."""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager

import pytest
import redis
from django.test import Client

from common.degrade import broker_dependency
from observability import components, health
from observability.beat import RecordingScheduler, beat_broker
from tests.support.processes import redis_server


def _point_at(app, url: str) -> None:
    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def celery_app():
    """The Celery app, its configuration read before any test overrides ``CELERY_BROKER_URL`` (it is read once,
    so a first read under the override would keep the private server for the tests after this one)."""
    from config.celery import app

    original = app.conf.broker_url
    yield app
    _point_at(app, original)
    beat_broker.down = broker_dependency.down = False  # module-wide outage flags: the next test starts clean


@pytest.fixture
def broker(settings, celery_app):
    """A private redis-server as the readiness check's broker, probed at every call."""
    settings.READYZ_BROKER_CHECK_EVERY_SECONDS = 0
    settings.READYZ_BROKER_TIMEOUT_SECONDS = 0.5
    health._broker_checked.clear()
    with redis_server() as server:
        settings.CELERY_BROKER_URL = server.url
        health.check_broker()  # the readiness dependency starts "available"
        yield server
        if server.process is None:
            server.start()
        health.check_broker()  # and is left so
    health._broker_checked.clear()


@contextmanager
def degrade_log(caplog):
    """The ``common.degrade`` lines, counted by this handler only."""
    logger = logging.getLogger("common.degrade")
    saved = logger.disabled, logger.propagate
    logger.disabled, logger.propagate = False, False
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(caplog.handler)
        logger.disabled, logger.propagate = saved


def readyz() -> dict:
    response = Client().get("/readyz")
    assert response.status_code == 200  # the broker never gates readiness
    return json.loads(response.content)["background"]


@pytest.mark.faults
def test_live_workers_are_unreachable_not_ok_while_the_broker_is_down(db, broker):
    components.worker_seen("w1@test")
    assert readyz()["workers"]["state"] == "ok"
    broker.stop()
    background = readyz()
    assert background["broker"] == {"state": "down"}
    assert background["workers"]["state"] == "unreachable"
    broker.start()
    assert readyz()["workers"]["state"] == "ok"


@pytest.mark.faults
def test_a_broker_outage_is_logged_once_when_it_starts_and_once_when_it_ends(db, broker, caplog):
    with degrade_log(caplog):
        health.check_broker()
        broker.stop()
        for _ in range(5):
            assert health.check_broker() == "down"
        broker.start()
        for _ in range(3):
            assert health.check_broker() == "ok"
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if m.startswith("celery broker (readiness) unavailable")]) == 1, lines
    assert len([m for m in lines if m == "celery broker (readiness) available again"]) == 1, lines
    assert not [r for r in caplog.records if r.exc_info]


@contextmanager
def celery_broker(app, url: str):
    """Celery's producers on ``url``; the ``celery_app`` fixture puts the original back."""
    _point_at(app, url)
    beat_broker.down = False
    yield app


def queued_tasks(url: str) -> list[str]:
    client = redis.Redis.from_url(url)
    names = []
    for key in client.keys("*"):
        if client.type(key) == b"list":
            names += [json.loads(raw)["headers"]["task"] for raw in client.lrange(key, 0, -1)]
    return names


@pytest.mark.faults
def test_beats_first_send_after_an_outage_sends_reconcile_at_once(db, broker, celery_app, tmp_path, settings):
    settings.BEAT_ON_BROKER_BACK = ["waitlist-reconcile"]
    with celery_broker(celery_app, broker.url) as app:
        scheduler = RecordingScheduler(app=app, schedule_filename=str(tmp_path / "schedule"))
        assert "waitlist-reconcile" in scheduler.schedule
        due = scheduler.Entry(name="t", task="waitlist.tasks.expire_offers", schedule=5.0, app=app)
        scheduler.apply_entry(due)
        assert queued_tasks(broker.url) == ["waitlist.tasks.expire_offers"]  # broker up: nothing extra
        broker.stop()
        scheduler.apply_entry(due)
        assert beat_broker.down
        broker.start()  # empty: the server keeps nothing
        scheduler.apply_entry(due)
        assert sorted(queued_tasks(broker.url)) == ["waitlist.tasks.expire_offers", "waitlist.tasks.reconcile"]
        scheduler.apply_entry(due)
        assert queued_tasks(broker.url).count("waitlist.tasks.reconcile") == 1  # once per return, not per send


@pytest.mark.faults
def test_a_vacancy_opened_during_the_outage_is_dispatched_by_the_reconcile_sent_on_the_brokers_return(
        db, broker, celery_app, tmp_path, settings, django_capture_on_commit_callbacks):
    from tests.waitlist.loop_helpers import open_vacancy
    from tests.worlds import waitlist_world
    from waitlist.models import Offer

    settings.BEAT_ON_BROKER_BACK = ["waitlist-reconcile"]
    world = waitlist_world()
    entry = world.waiting(world.patient())
    with celery_broker(celery_app, broker.url) as app:
        scheduler = RecordingScheduler(app=app, schedule_filename=str(tmp_path / "schedule"))
        due = scheduler.Entry(name="t", task="waitlist.tasks.expire_offers", schedule=5.0, app=app)
        broker.stop()
        with django_capture_on_commit_callbacks(execute=True):
            vacancy = open_vacancy(world)  # its dispatch task cannot be sent: left to reconcile
        scheduler.apply_entry(due)
        assert not Offer.objects.filter(vacancy=vacancy).exists()
        broker.start()
        scheduler.apply_entry(due)  # beat's first send after the return
        assert "waitlist.tasks.reconcile" in queued_tasks(broker.url)
        app.tasks["waitlist.tasks.reconcile"].apply()  # what a worker does with that message
    assert Offer.objects.get(vacancy=vacancy).entry_id == entry.pk


@pytest.mark.faults
def test_an_outage_only_a_web_process_saw_has_beat_send_reconcile_at_its_next_tick(
        db, broker, celery_app, tmp_path, settings, django_capture_on_commit_callbacks):
    """A short outage (a Sentinel failover takes a few seconds) can fall between two of beat's sends: beat sees
    nothing, but the web process that could not send a vacancy's dispatch says so in PostgreSQL, and beat's next
    tick sends reconcile, not reconcile's next minute."""
    from tests.waitlist.loop_helpers import open_vacancy
    from tests.worlds import waitlist_world
    from waitlist.models import Offer

    settings.BEAT_ON_BROKER_BACK = ["waitlist-reconcile"]
    world = waitlist_world()
    entry = world.waiting(world.patient())
    with celery_broker(celery_app, broker.url) as app:
        scheduler = RecordingScheduler(app=app, schedule_filename=str(tmp_path / "schedule"))
        scheduler.tick()
        assert "waitlist.tasks.reconcile" not in queued_tasks(broker.url)  # nothing failed: nothing extra
        broker.stop()
        with django_capture_on_commit_callbacks(execute=True):
            vacancy = open_vacancy(world)  # its dispatch task cannot be sent
        broker.start()  # back before beat sent anything
        assert not beat_broker.down
        scheduler.tick()
        assert queued_tasks(broker.url).count("waitlist.tasks.reconcile") == 1
        scheduler.tick()
        assert queued_tasks(broker.url).count("waitlist.tasks.reconcile") == 1  # once per outage, not per tick
        app.tasks["waitlist.tasks.reconcile"].apply()
    assert Offer.objects.get(vacancy=vacancy).entry_id == entry.pk
