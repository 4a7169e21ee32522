"""The correlation id of the work in progress: one id per HTTP request or Celery task.

A contextvar, so threads and asyncio tasks each see their own. The web middleware and the Celery
signal hooks (``observability.correlation``) bind it; ``new_correlation_id`` hands it to services,
so outbox rows, offer events and audit rows carry the id of the request or task that wrote them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: The correlation id of the work running now (bound per request by the middleware, per task by the worker).
correlation_var: ContextVar[str] = ContextVar("correlation_id", default="")

#: What we accept from a caller's ``X-Correlation-ID``: short and boring (it lands in logs and rows).
VALID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


def current_correlation_id() -> str:
    return correlation_var.get()


def fresh_correlation_id() -> str:
    return uuid.uuid4().hex


def clean(value) -> str:
    """A caller-supplied id if it is well formed, else ""."""
    return value if isinstance(value, str) and VALID.match(value) else ""


@contextmanager
def bound(correlation_id: str) -> Iterator[str]:
    """Run a block under ``correlation_id`` (a fresh one if empty); restores the previous id after."""
    correlation_id = correlation_id or fresh_correlation_id()
    token = correlation_var.set(correlation_id)
    try:
        yield correlation_id
    finally:
        correlation_var.reset(token)
