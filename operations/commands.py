"""The one command runner of the console: every write runs once per (clinic, user, idempotency key).

A double submit or a replayed form shows the first answer instead of acting twice; the same key with
another request is ``IDEMPOTENCY_KEY_REUSED`` (422). Domain refusals are answered and stored like
successes (``run_idempotent``), so records a service keeps on refusal (e.g. ``BOOKING_RETRY_FAILED``)
stay committed. The actor is always ``request.user``; the command names are ``scoping.COMMAND_ROLES``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse

from common.errors import DomainError
from common.idempotency import request_digest, run_idempotent
from scheduling.models import Clinic

from .responses import console_error


@dataclass(frozen=True)
class Outcome:
    """A command's answer: its HTTP status, its body (stored as JSON) and whether it was a replay."""

    status: int
    body: dict
    replayed: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        """A refusal for a toast: ``CODE: detail``."""
        return f"{self.body.get('code')}: {self.body.get('detail', '')}"


def run_command(
    request: HttpRequest,
    clinic: Clinic,
    *,
    command: str,
    key: str,
    parts: Sequence[object],
    execute: Callable[[], dict],
) -> Outcome:
    """Run ``execute`` (whose dict is the 200 answer) once per (clinic, user, key); never raises a DomainError."""
    try:
        stored = run_idempotent(
            scope=f"console:{clinic.ref}:{request.user.pk}",
            key=key,
            command=f"console.{command}",
            digest=request_digest(command, *parts),
            execute=lambda _receipt: (200, execute()),
        )
    except DomainError as exc:  # the key was used for another request
        return Outcome(exc.status_code, exc.as_body())
    return Outcome(stored.status_code, json.loads(stored.body), stored.replayed)


def refused(request: HttpRequest, outcome: Outcome) -> HttpResponse:
    """The console's answer to a refusal: the error page, or a toast for htmx."""
    return console_error(request, outcome.status, outcome.message)
