"""The Celery app: queues for delivery, reevaluation and maintenance so each scales alone."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("clinic_waitlist")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _add_steps() -> None:
    # Imported lazily: the step reads Django settings and models, which need the app registry.
    from observability.worker import HeartbeatStep

    app.steps["worker"].add(HeartbeatStep)


_add_steps()
