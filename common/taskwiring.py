"""Beat's schedule and the tasks' queues, registered by the apps that own the tasks (issue 42: no setting names
an app's code).

Each app says in its ``AppConfig.ready()`` which of its tasks beat sends and how often (``periodic_register``)
and which of them run on a queue of their own (``queue_register``; any other runs on
``CELERY_TASK_DEFAULT_QUEUE``). Beat's scheduler (``observability.beat.RecordingScheduler``) reads
``periodic_schedule()`` when it starts, after Django's set-up has run every app's ``ready()``; Celery's router
asks ``queue_route`` for every task any process sends (``config/celery.py``)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

_SCHEDULE: dict[str, dict[str, Any]] = {}
_QUEUES: dict[str, str] = {}


def periodic_register(name: str, task: Any, *, every: float) -> None:
    """Beat sends ``task`` (a Celery task object) every ``every`` seconds under the entry ``name``. The same
    entry registered again (a second ``ready()``) is a no-op; a different one under a taken name is refused."""
    _register(_SCHEDULE, name, {"task": task.name, "schedule": float(every)}, "beat entry")


def periodic_schedule() -> dict[str, dict[str, Any]]:
    """Every registered entry in Celery's ``beat_schedule`` form (a copy)."""
    return {name: dict(entry) for name, entry in _SCHEDULE.items()}


def queue_register(queue: str, *tasks: Any) -> None:
    """Each of ``tasks`` (Celery task objects) is sent to ``queue``; a second, different queue is refused."""
    for task in tasks:
        _register(_QUEUES, task.name, queue, "task queue of")


def queue_route(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any) -> dict | None:
    """Celery's router (``task_routes``): the registered queue of the task called ``name``, else None
    (the default queue)."""
    queue = _QUEUES.get(name)
    return {"queue": queue} if queue else None


def _register(table: dict, key: str, value: Any, what: str) -> None:
    if table.setdefault(key, value) != value:
        raise ImproperlyConfigured(f"{what} {key!r} is registered twice, differently")
