"""Compare-and-set on versioned rows: the one way a state-bearing row changes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import F

from .errors import Conflict, VersionConflict


def cas_update(
    instance: Any,  # a model with ``version`` (and ``status`` when expected_status is given)
    *,
    expected_status: str | Iterable[str] | None = None,
    expected_version: int | None = None,
    **changes,
) -> None:
    """Write ``changes`` and ``version + 1`` only if the row still has the expected state and version.

    Callers hold the row lock already (lock order in ARCHITECTURE.md); the conditional update
    still guards against a stale in-memory copy. On success the instance is refreshed in place.
    """
    model = type(instance)
    version = instance.version if expected_version is None else expected_version
    flt = {"pk": instance.pk, "version": version}
    if expected_status is not None:
        statuses = [expected_status] if isinstance(expected_status, str) else list(expected_status)
        flt["status__in"] = statuses
    updated = model._default_manager.filter(**flt).update(version=F("version") + 1, **changes)
    if updated != 1:
        current = model._default_manager.filter(pk=instance.pk).values("status", "version").first()
        if current is None or current["version"] != version:
            raise VersionConflict(f"{model.__name__} was changed by someone else.")
        raise Conflict(f"{model.__name__} is {current['status']}.", code="STATE_CONFLICT")
    for key, value in changes.items():
        setattr(instance, key, value)
    instance.version = version + 1


def check_transition(allowed: dict[str, set[str]], current: str, target: str, *, code: str) -> None:
    """Refuse a move that the state machine does not list."""
    if target not in allowed.get(current, set()):
        raise Conflict(f"Cannot move from {current} to {target}.", code=code)
