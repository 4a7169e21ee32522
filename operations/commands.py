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
from common.services import audit_record
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
        """A refusal for a toast: ``Words: detail (CODE)`` for a code the glossary knows, else ``CODE: detail``."""
        from operations.labels import code_label

        code, detail = str(self.body.get("code")), self.body.get("detail", "")
        words = code_label(code)
        return f"{code}: {detail}" if words == code else f"{words}: {detail} ({code})"


def run_command(
    request: HttpRequest,
    clinic: Clinic,
    *,
    command: str,
    key: str,
    parts: Sequence[object],
    execute: Callable[[], dict],
    audit_reason: str | None = None,
) -> Outcome:
    """Run ``execute`` (whose dict is the 200 answer) once per (clinic, user, key); never raises a DomainError.

    ``audit_reason``: the console writes the audit row itself (``console.<command>``, with this reason and the
    answer), in the command's transaction: for a service that keeps no audit row of its own, or evidence the
    service has no field for ("the patient said so on the phone")."""

    def run(_receipt) -> tuple[int, dict]:
        body = execute()
        if audit_reason is not None:
            audit_record(actor=request.user, action=f"console.{command}", clinic=clinic,
                         target_ref=str(body.get("ref", ""))[:40], reason=audit_reason, idempotency_key=key,
                         correlation_id=body.get("correlation_id", ""), result=body)
        return 200, body

    try:
        stored = run_idempotent(
            scope=f"console:{clinic.ref}:{request.user.pk}",
            key=key,
            command=f"console.{command}",
            digest=request_digest(command, *parts),
            execute=run,
        )
    except DomainError as exc:  # the key was used for another request
        return Outcome(exc.status_code, exc.as_body())
    return Outcome(stored.status_code, json.loads(stored.body), stored.replayed)


def refused(request: HttpRequest, outcome: Outcome) -> HttpResponse:
    """The console's answer to a refusal: the error page, or a toast for htmx."""
    return console_error(request, outcome.status, outcome.message)
