"""Beat's scheduler, recording its own life and its sends (observability.components), saying a broker
outage once instead of a traceback per due task, and sending the catch-up entries (``BEAT_ON_BROKER_BACK``:
reconcile) the moment a send succeeds again: vacancies opened during the outage lost their dispatch task,
and reconcile finds them (issue 43: they waited up to its 60 s interval)."""

from __future__ import annotations

import logging
import socket
import time

from celery.beat import PersistentScheduler
from django.conf import settings

from common.degrade import Dependency

logger = logging.getLogger(__name__)

#: Seconds between two heartbeat writes of the same kind (a tick is every few seconds; one row write is enough).
RECORD_EVERY = 10.0

beat_broker = Dependency(
    "celery broker (beat)", "due tasks are not sent; beat keeps ticking and sends again once it is back"
)


class RecordingScheduler(PersistentScheduler):
    """Celery's file-backed scheduler plus a heartbeat row in PostgreSQL (``Heartbeat`` role beat)."""

    def __init__(self, *args, **kwargs):
        self._recorded: dict[object, float] = {}
        self._node = f"beat@{socket.gethostname()}"
        super().__init__(*args, **kwargs)

    def _record(self, sent: bool | None) -> None:
        now = time.monotonic()
        if now - self._recorded.get(sent, -RECORD_EVERY) < RECORD_EVERY:
            return
        self._recorded[sent] = now
        from . import components  # the app registry is ready once beat ticks

        components.beat_seen(self._node, sent=sent)

    def tick(self, *args, **kwargs):
        self._record(None)
        return super().tick(*args, **kwargs)

    def apply_entry(self, entry, producer=None):
        was_down = beat_broker.down
        try:
            self.apply_async(entry, producer=producer, advance=False)
        except Exception as exc:  # noqa: BLE001 - Celery's own apply_entry swallows it too, with a stack per task
            beat_broker.failed(exc)
            self._recorded.pop(True, None)
            self._record(False)
        else:
            beat_broker.ok()
            self._record(True)
            if was_down:
                self._catch_up(entry, producer)

    def _catch_up(self, sent, producer) -> None:
        """The broker is back: send ``BEAT_ON_BROKER_BACK``'s entries now rather than at their next due time."""
        for name in getattr(settings, "BEAT_ON_BROKER_BACK", ()):
            entry = self.schedule.get(name)
            if entry is None or entry.name == sent.name:
                continue
            try:
                self.apply_async(entry, producer=producer, advance=False)
            except Exception as exc:  # noqa: BLE001 - down again: the next success catches up
                beat_broker.failed(exc)
                return
            logger.info("beat: broker back, %s sent at once", name)
