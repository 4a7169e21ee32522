"""After-commit effects by name: services say *what* should follow their commit, apps say *how*.

A service calls ``after_commit("waitlist.dispatch", vacancy_id=...)`` inside its transaction; the app that
owns the follow-up registers the handler at ready (``register``), e.g. one that queues a Celery task.
So services never import task modules, and the handler is looked up when the transaction commits.

The handler runs once the transaction commits (never inside it, never after a rollback). It must not fail
the caller: the change is committed by then. A failing handler (the broker down) is logged once per outage
(``common.degrade.broker_dependency``), the callbacks registered with ``send_failure_register`` are told (beat
then sends reconcile as soon as it can: observability/beat.py), and the follow-up is left to its reconcile job.
Arguments are ids, never model instances: the effect reads what it needs when it runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

from .degrade import broker_dependency

logger = logging.getLogger(__name__)

_HANDLERS: dict[str, Callable[..., object]] = {}
_SEND_FAILED: list[Callable[[], None]] = []


def register(name: str, handler: Callable[..., object]) -> None:
    """``handler(**ids)`` runs the effect ``name`` (a later registration replaces an earlier one)."""
    _HANDLERS[name] = handler


def send_failure_register(callback: Callable[[], None]) -> None:
    """``callback()`` runs after an effect failed (registered at an app's ready; never raises into the caller)."""
    if callback not in _SEND_FAILED:
        _SEND_FAILED.append(callback)


def _tell_send_failed() -> None:
    for callback in _SEND_FAILED:
        try:
            callback()
        except Exception:  # noqa: BLE001 - the commit stands; reconcile's own interval still applies
            logger.debug("a send-failure callback failed", exc_info=True)


def after_commit(name: str, **ids: int) -> None:
    """Run effect ``name`` with ``ids`` once the current transaction commits (at once outside one).

    An unknown name is a programming error and fails here, inside the caller's transaction."""
    if name not in _HANDLERS:
        raise LookupError(f"no handler registered for effect {name!r}")

    def run() -> None:
        try:
            _HANDLERS[name](**ids)
        except Exception as exc:  # noqa: BLE001 (kombu, redis and socket errors alike; the commit stands)
            broker_dependency.failed(exc)
            _tell_send_failed()
        else:
            broker_dependency.ok()

    transaction.on_commit(run)
