"""Log records as one JSON object a line (``LOG_FORMAT=json``), each with the correlation id.

Only the formatted message and a few fixed fields are written: the codebase logs refs, states and
reason codes (never names or contacts), and this formatter adds nothing from the request.
"""

from __future__ import annotations

import json
import logging
import traceback
from datetime import UTC, datetime

from common.correlation import current_correlation_id


class CorrelationFilter(logging.Filter):
    """Stamps ``record.correlation_id`` (empty outside a request or task) for both formats."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "correlation_id", ""):
            record.correlation_id = current_correlation_id()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "correlation_id": getattr(record, "correlation_id", "") or current_correlation_id(),
            "process": record.process,
        }
        if record.exc_info and record.exc_info[0]:
            # The type and the frames, not the exception's text: a database error's text can quote row values.
            body["exc_type"] = record.exc_info[0].__name__
            body["stack"] = "".join(traceback.format_tb(record.exc_info[2]))
        return json.dumps(body, ensure_ascii=False, default=str)


class RepeatBackoffFilter(logging.Filter):
    """Backs off a warning that repeats: a worker or beat that cannot reach the broker retries every few
    seconds, and each retry used to print a traceback (15,000 lines in minutes). The first record of a
    kind (logger, level, message template) passes with its traceback; repeats pass only after 1, 2, 4 …
    ``max_interval`` seconds, without the traceback and with how many were held back. A kind quiet for
    ``max_interval`` starts again from the first record. Only the noisy loggers (``prefixes``) at WARNING
    and above are backed off; everything else passes untouched."""

    prefixes: tuple[str, ...] = ("celery.worker.consumer", "celery.worker.pidbox", "celery.beat", "celery.bootsteps",
                                 "kombu", "amqp", "redis")

    def __init__(self, name: str = "", max_interval: float = 300.0, clock=None):
        super().__init__(name)
        import time

        self.max_interval = max_interval
        self.clock = clock or time.monotonic
        self._kinds: dict[tuple, list[float]] = {}  # kind → [last passed at, next interval, suppressed, last seen]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not record.name.startswith(self.prefixes):
            return True
        now = self.clock()
        kind = (record.name, record.levelno, str(record.msg))
        state = self._kinds.get(kind)
        if state is None or now - state[3] >= self.max_interval:
            self._kinds[kind] = [now, 1.0, 0, now]
            return True
        state[3] = now
        if now - state[0] < state[1]:
            state[2] += 1
            return False
        suppressed = int(state[2])
        state[0], state[1], state[2] = now, min(state[1] * 2, self.max_interval), 0
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        if suppressed:
            record.msg = f"{record.msg} (repeated; {suppressed} similar lines held back)"
        return True
