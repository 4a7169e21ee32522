"""One correlation id follows a story: HTTP request → audit row → Celery task (real worker, real Redis)
→ offer event and outbox row → delivery; the JSON log lines carry it and no patient data."""

from __future__ import annotations

import io
import json
import logging
import threading
import uuid

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.db import connections

from common.correlation import bound, current_correlation_id
from common.models import AuditEntry, OutboxMessage
from common.services import new_correlation_id
from config.celery import app
from observability.logs import CorrelationFilter, JsonFormatter
from scheduling.models import Role
from tests import factories as f
from tests.conftest import assert_no_pii, seoul, token_client
from tests.waitlist.loop_helpers import deliver, open_vacancy
from tests.worlds import waitlist_world
from waitlist import services, tasks
from waitlist.models import OfferEvent

STORY = "story-0123456789abcdef"


@pytest.fixture
def json_log():
    """The app loggers' records as this project's JSON lines (not on root: a worker starting up may
    re-apply LOGGING, which resets the root logger's handlers)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(CorrelationFilter())
    loggers = [logging.getLogger(name) for name in ("waitlist", "common", "reevaluation", "observability")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_json_log_line_is_one_object_with_the_bound_correlation_id(json_log):
    with bound("abc12345-id"):
        logging.getLogger("waitlist").info("offer %s expired", "off_x")
    (line,) = json_log()
    assert line["message"] == "offer off_x expired"
    assert line["correlation_id"] == "abc12345-id"
    assert {"ts", "level", "logger"} <= set(line)


def test_a_json_log_line_carries_no_exception_text(json_log):
    email = "jane" + "@example.com"  # not a literal: the stack quotes source lines
    try:
        raise ValueError(f"patient {email} exists")
    except ValueError:
        logging.getLogger("waitlist").exception("failed")
    (line,) = json_log()
    assert line["exc_type"] == "ValueError"
    assert email not in json.dumps(line)


def test_new_correlation_id_is_the_bound_one_and_fresh_outside():
    with bound("bound-id-123"):
        assert new_correlation_id() == "bound-id-123"
    assert current_correlation_id() == ""
    assert new_correlation_id() != new_correlation_id()


@pytest.mark.django_db
def test_the_response_echoes_a_well_formed_id_and_replaces_a_malformed_one(client):
    assert client.get("/healthz", HTTP_X_CORRELATION_ID=STORY)["X-Correlation-ID"] == STORY
    replaced = client.get("/healthz", HTTP_X_CORRELATION_ID="bad id\nwith newline")["X-Correlation-ID"]
    assert replaced != "bad id\nwith newline" and len(replaced) == 32


@pytest.mark.django_db(transaction=True)
def test_one_id_follows_request_task_delivery_and_audit(json_log, monkeypatch):
    world = waitlist_world()
    admin = f.user_with_role(world.clinic, Role.ADMIN)
    entry = world.waiting()
    vacancy = open_vacancy(world, seoul(3, 10))  # not dispatched (no task here); closed, then reopened below
    services.vacancy_close(clinic=world.clinic, vacancy_ref=vacancy.ref, actor=admin, reason="setup")
    deliver()  # anything the setup queued is delivered before the story starts

    queue = f"test-corr-{uuid.uuid4().hex[:8]}"
    dispatch = tasks.dispatch_vacancy
    monkeypatch.setattr(dispatch, "delay", lambda vacancy_id: dispatch.apply_async((vacancy_id,), queue=queue))
    done = threading.Event()

    def on_postrun(task=None, **_kwargs):
        connections.close_all()  # the worker thread's connection, so the test database can be dropped
        if task is not None and task.name == tasks.dispatch_vacancy.name:
            done.set()

    task_postrun.connect(on_postrun, weak=False)
    try:
        with start_worker(app, pool="solo", queues=[queue], perform_ping_check=False, shutdown_timeout=30):
            response = token_client(admin).post(
                f"/api/v1/clinics/{world.clinic.ref}/vacancies/{vacancy.ref}/reopen",
                {"reason": "patient list fixed"}, format="json", HTTP_X_CORRELATION_ID=STORY,
                HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex,
            )
            assert response.status_code == 200, response.content
            assert done.wait(timeout=60), "the worker never ran the dispatch task"
    finally:
        task_postrun.disconnect(on_postrun)

    assert response["X-Correlation-ID"] == STORY
    assert json.loads(response.content)["correlation_id"] == STORY
    assert AuditEntry.objects.get(action__contains="reopen").correlation_id == STORY
    matched = OfferEvent.objects.get(offer__entry=entry, reason_code="MATCHED")
    assert matched.correlation_id == STORY  # written inside the task, from the message header
    message = OutboxMessage.objects.get(aggregate_ref=matched.offer.ref)
    assert message.correlation_id == STORY
    deliver()

    lines = json_log()
    story = [line["message"] for line in lines if line["correlation_id"] == STORY]
    assert any("OFFERED" in m for m in story), story  # the task's log line
    assert any(m.startswith("outbox delivered") and message.ref in m for m in story), story  # the delivery's
    assert_no_pii(json.dumps(lines), [entry.patient])


def test_log_format_json_makes_the_console_handler_write_json_lines():
    import os
    import subprocess
    import sys

    from django.conf import settings

    code = (
        "import django, logging; django.setup(); from common.correlation import bound\n"
        "with bound('env-json-1234'): logging.getLogger('waitlist').warning('vacancy %s opened', 'vac_x')\n"
    )
    env = {**os.environ, "LOG_FORMAT": "json", "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    done = subprocess.run([sys.executable, "-c", code], cwd=settings.BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    line = json.loads(done.stderr.strip().splitlines()[-1])
    assert (line["message"], line["correlation_id"], line["level"]) == ("vacancy vac_x opened", "env-json-1234",
                                                                         "WARNING")
