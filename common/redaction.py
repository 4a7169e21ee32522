"""Claim links are bearer credentials: no log record may carry one (issue 16 part 1).

``redact`` replaces the token in ``/claim/<token>`` with a short digest (``sha256:<12 hex>``), enough
to correlate a support question with a log line, useless to open the page. It is applied to every
log record at creation (``install_record_factory``, from ``CommonConfig.ready``), so Django's request
log, gunicorn's error log, Celery and any third-party logger are covered, and explicitly by the
gunicorn access-log class (``config.gunicorn_logging``) and the ``console`` notification provider.
"""

from __future__ import annotations

import hashlib
import logging
import re

#: ``/claim/`` followed by the token: anything up to a separator that cannot occur in a token.
CLAIM_PATH = re.compile(r"(/claim/)([^/\s?#\"'<>]+)")


def token_digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def redact(text: str) -> str:
    """``text`` with every claim token replaced by its digest (idempotent)."""
    if "/claim/" not in text:
        return text
    return CLAIM_PATH.sub(
        lambda m: m.group(0) if m.group(2).startswith("sha256:") else m.group(1) + token_digest(m.group(2)),
        text,
    )


def _redact_value(value):
    return redact(value) if isinstance(value, str) else value


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """Redact the message template and its arguments (tuple or mapping) in place."""
    if isinstance(record.msg, str):
        record.msg = redact(record.msg)
    args = record.args
    if isinstance(args, dict):
        # In place: the mapping may be a dict subclass with its own lookup (gunicorn's SafeAtoms).
        changed = [(key, redact(value)) for key, value in args.items() if isinstance(value, str) and "/claim/" in value]
        for key, value in changed:
            dict.__setitem__(args, key, value)
    elif isinstance(args, tuple):
        record.args = tuple(_redact_value(value) for value in args)
    return record


class RedactClaimTokens(logging.Filter):
    """The same redaction as a logging filter, for handlers configured outside Django."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


_installed = False


def install_record_factory() -> None:
    """Wrap the process's LogRecord factory once so every record is redacted where it is made."""
    global _installed
    if _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        return redact_record(previous(*args, **kwargs))

    logging.setLogRecordFactory(factory)
    _installed = True
