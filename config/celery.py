"""The Celery app: queues for delivery, reevaluation and maintenance so each scales alone."""

import os

from celery import Celery, signals

from common.taskwiring import queue_route
from config.settings import default_module

os.environ.setdefault("DJANGO_SETTINGS_MODULE", default_module())

app = Celery("clinic_waitlist")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Beat records its own life in PostgreSQL (observability.components) and sends the entries the apps registered
# (common/taskwiring.py).
app.conf.beat_scheduler = "observability.beat:RecordingScheduler"
# Each task's queue is the one its app registered (common/taskwiring.py).
app.conf.task_routes = (queue_route,)
app.autodiscover_tasks()
app.autodiscover_tasks(["waitlist.joining"])  # beat's jobs of self-service joining (issue 40)


def _add_steps() -> None:
    # Imported lazily: the step reads Django settings and models, which need the app registry.
    from observability.worker import HeartbeatStep

    app.steps["worker"].add(HeartbeatStep)


_add_steps()


@signals.task_prerun.connect
def _fresh_connection(**_kwargs) -> None:
    """Before each task, drop a connection that errored or outlived CONN_MAX_AGE (health checks on: the first
    query of the task checks a reused one), since the worker keeps connections across tasks
    (``CELERY_DB_REUSE_MAX``). A task run eagerly inside a caller's transaction keeps the caller's connection."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()
