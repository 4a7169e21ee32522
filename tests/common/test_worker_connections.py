"""The Celery worker keeps its PostgreSQL connection across tasks (issue 27: a new backend and re-prepared
statements per dispatch and per delivery were a tenth of the worker's time in the storm), yet never runs a task on
a connection that is obsolete."""

from __future__ import annotations

import time

import pytest
from celery import signals
from celery.fixups.django import DjangoWorkerFixup
from django.conf import settings
from django.db import connection

from config.celery import app

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_worker_reuses_its_database_connection_between_tasks():
    fixup = DjangoWorkerFixup(app)
    assert fixup.db_reuse_max == settings.CELERY_DB_REUSE_MAX >= 50
    connection.ensure_connection()
    opened = connection.connection
    fixup.close_database()  # what Celery runs after each task
    assert connection.connection is opened


def test_a_connection_past_its_max_age_is_dropped_before_the_next_task():
    connection.ensure_connection()
    connection.close_at = time.monotonic() - 1  # older than CONN_MAX_AGE
    signals.task_prerun.send(sender=None, task_id="t", task=None, args=(), kwargs={})
    assert connection.connection is None
