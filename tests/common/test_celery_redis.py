"""The beat job path end to end: a real Celery worker consuming from the real Redis broker."""

from __future__ import annotations

import threading
import uuid

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.db import connections

from common import outbox
from common.models import OutboxMessage, OutboxStatus
from common.services import outbox_enqueue
from common.tasks import deliver_outbox
from config.celery import app

TOPIC = "test.celery"


@pytest.mark.django_db(transaction=True)
def test_a_delivery_task_sent_through_redis_is_run_by_a_worker():
    sent: list[str] = []
    finished = threading.Event()

    def on_postrun(task_id=None, **_kwargs):
        # Runs in the worker's thread: close its DB connection so the test database can be dropped.
        connections.close_all()
        if task_id == task_ids[0]:
            finished.set()

    task_ids: list[str] = []
    outbox.register_handler(TOPIC, lambda message: sent.append(message.ref) or "test")
    task_postrun.connect(on_postrun, weak=False)
    queue = f"test-{uuid.uuid4().hex[:8]}"
    try:
        message = outbox_enqueue(topic=TOPIC, tenant_group_ref="tg", clinic_ref="cl", aggregate_ref="a", payload={})
        with start_worker(app, pool="solo", queues=[queue], perform_ping_check=False, shutdown_timeout=30):
            task_ids.append(str(uuid.uuid4()))
            deliver_outbox.apply_async(kwargs={"limit": 10}, queue=queue, task_id=task_ids[0])
            assert finished.wait(timeout=30), "the worker never ran the task"
        assert OutboxMessage.objects.get(pk=message.pk).status == OutboxStatus.SENT
        assert sent == [message.ref]
    finally:
        task_postrun.disconnect(on_postrun)
        outbox._HANDLERS.pop(TOPIC, None)
