"""Beat's scheduler, recording its own life and its sends (observability.components), saying a broker
outage once instead of a traceback per due task, and sending the catch-up entries (``BEAT_ON_BROKER_BACK``:
reconcile) the moment the broker is back: vacancies opened during the outage lost their dispatch task, and
reconcile finds them (issue 43: they waited up to its 60 s interval). Beat knows the broker is back when its own
send succeeds after failing, or, for an outage only another process saw (a short one can fall between two of
beat's sends), when a web or worker process noted a failed send since the last catch-up
(``components.last_send_failure``): beat's next tick then catches up, once per outage."""

from __future__ import annotations

import logging
import socket
import time

from celery.beat import PersistentScheduler
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

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
        # When the catch-up entries were last sent (None: not yet; a failure noted before beat started counts).
        self._caught_up_at = None
        super().__init__(*args, **kwargs)

    def setup_schedule(self) -> None:
        """The schedule is what the apps registered (``common.taskwiring``; Django's set-up ran their ``ready()``
        before beat builds its scheduler), plus any ``beat_schedule`` given to Celery directly."""
        from common.taskwiring import periodic_schedule

        self.app.conf.beat_schedule = {**periodic_schedule(), **(self.app.conf.beat_schedule or {})}
        super().setup_schedule()

    def _record(self, sent: bool | None) -> None:
        now = time.monotonic()
        if now - self._recorded.get(sent, -RECORD_EVERY) < RECORD_EVERY:
            return
        self._recorded[sent] = now
        from . import components  # the app registry is ready once beat ticks

        components.beat_seen(self._node, sent=sent)

    def tick(self, *args, **kwargs):
        self._record(None)
        self._catch_up_after_others()
        return super().tick(*args, **kwargs)

    def _catch_up_after_others(self) -> None:
        """Another process could not send a follow-up since the last catch-up: catch up now. While beat's own
        sends fail, the first one that succeeds does it instead (``apply_entry``)."""
        if beat_broker.down:
            return
        from . import components

        try:
            if not connection.in_atomic_block:
                close_old_connections()
            failed_at = components.last_send_failure()
        except DatabaseError:  # the heartbeat store logs its own outage; reconcile's interval still applies
            return
        if failed_at is not None and (self._caught_up_at is None or failed_at > self._caught_up_at):
            self._catch_up(None, None)

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
        """The broker is back: send ``BEAT_ON_BROKER_BACK``'s entries now rather than at their next due time
        (``sent``: the entry just sent, not sent twice)."""
        started = timezone.now()
        for name in getattr(settings, "BEAT_ON_BROKER_BACK", ()):
            entry = self.schedule.get(name)
            if entry is None or (sent is not None and entry.name == sent.name):
                continue
            try:
                self.apply_async(entry, producer=producer, advance=False)
            except Exception as exc:  # noqa: BLE001 - down again: the next success catches up
                beat_broker.failed(exc)
                return
            logger.info("beat: broker back, %s sent at once", name)
        self._caught_up_at = started
