"""Beat's scheduler, recording its own life and its sends (observability.components), and saying a
broker outage once instead of a traceback per due task."""

from __future__ import annotations

import logging
import socket
import time

from celery.beat import PersistentScheduler

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
        try:
            self.apply_async(entry, producer=producer, advance=False)
        except Exception as exc:  # noqa: BLE001 - Celery's own apply_entry swallows it too, with a stack per task
            beat_broker.failed(exc)
            self._recorded.pop(True, None)
            self._record(False)
        else:
            beat_broker.ok()
            self._record(True)
