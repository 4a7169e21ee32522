"""A worker bootstep that records the worker's life in PostgreSQL every ``WORKER_HEARTBEAT_SECONDS``,
broker or not (observability.components): an operator can tell a dead worker from a dead broker."""

from __future__ import annotations

from celery import bootsteps
from django.conf import settings


class HeartbeatStep(bootsteps.StartStopStep):
    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        self.tref = None
        super().__init__(worker, **kwargs)

    def start(self, worker):
        from . import components  # the app registry is ready once the worker starts

        interval = float(getattr(settings, "WORKER_HEARTBEAT_SECONDS", 15))
        components.worker_seen(worker.hostname)
        self.tref = worker.timer.call_repeatedly(interval, components.worker_seen, (worker.hostname,), priority=10)

    def stop(self, worker):
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None
