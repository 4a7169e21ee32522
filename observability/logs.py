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
