"""Issue 16 part 3: PostgreSQL-only requests keep working with Redis down, and a broker outage never
turns a committed change into a 500 (logged once; reconcile picks the follow-up up)."""

from __future__ import annotations

import logging

import pytest

from common.degrade import broker_dependency, cache_dependency
from config.celery import app as celery_app
from scheduling.models import Appointment, AppointmentStatus
from tests.conftest import seoul, token_client
from tests.worlds import waitlist_world
from waitlist.models import Vacancy

CLOSED = "redis://127.0.0.1:1/0"


@pytest.fixture
def redis_down(settings):
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": CLOSED}}
    cache_dependency.down = False
    yield
    cache_dependency.down = False


@pytest.fixture
def broker_down():
    """The real Celery app pointed at a closed port (its connection pools rebuilt around the test)."""
    original = celery_app.conf.broker_url

    def reset(url):
        celery_app.conf.broker_url = url
        celery_app._pool = None
        celery_app.amqp._producer_pool = None

    reset(CLOSED)
    broker_dependency.down = False
    yield
    reset(original)
    broker_dependency.down = False


@pytest.fixture(autouse=True)
def degrade_log(caplog):
    """Capture ``common.degrade`` directly: an earlier test in the process (a Celery worker, a logging
    reconfiguration) may leave the logger disabled or not propagating to caplog's root handler."""
    logger = logging.getLogger("common.degrade")
    saved = logger.disabled, logger.propagate, logger.level
    logger.disabled, logger.propagate = False, False
    logger.setLevel(logging.WARNING)
    logger.addHandler(caplog.handler)
    yield
    logger.removeHandler(caplog.handler)
    logger.disabled, logger.propagate, logger.level = saved


def _warnings(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "common.degrade" and name in r.getMessage()]


def test_api_reads_and_writes_answer_with_redis_down_and_warn_once(db, redis_down, caplog):
    world = waitlist_world()
    client = token_client(world.staff)
    url = f"/api/v1/clinics/{world.clinic.ref}/treatments/"
    assert [client.get(url).status_code for _ in range(3)] == [200, 200, 200]
    assert len(_warnings(caplog, "redis cache unavailable")) == 1


def test_a_cancel_commits_and_answers_200_with_the_broker_down(
    db, broker_down, caplog, django_capture_on_commit_callbacks
):
    world = waitlist_world()
    client = token_client(world.staff)
    answers = []
    with django_capture_on_commit_callbacks(execute=True):
        for hour in (10, 11):
            appointment = world.confirmed(seoul(3, hour))
            answers.append(
                client.post(
                    f"/api/v1/clinics/{world.clinic.ref}/appointments/{appointment.ref}/cancel",
                    {"reason": "patient called"}, format="json", HTTP_IDEMPOTENCY_KEY=f"k-{hour}",
                )
            )
    assert [a.status_code for a in answers] == [200, 200], answers[0].content
    assert Appointment.objects.filter(status=AppointmentStatus.CANCELLED).count() == 2
    assert Vacancy.objects.count() == 2  # left OPEN for reconcile to dispatch
    assert len(_warnings(caplog, "celery broker unavailable")) == 1
    assert not [r for r in caplog.records if r.exc_info]  # no traceback per request


def test_the_crm_intake_answers_with_redis_down(db, redis_down, client):
    response = client.post(
        "/api/v1/events/patient-scheduling-assessment-changed", data=b"{}", content_type="application/json"
    )
    assert response.status_code == 401 and response.json()["code"] == "SIGNATURE_INVALID"
