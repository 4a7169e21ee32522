"""Compare-and-set on versioned rows: the one way a state-bearing row changes.

A model with a state machine declares it as ``STATE_MACHINE = ("<status column>", TRANSITIONS)``
next to its table; ``cas_update`` and ``cas_update_all`` read it, so a move the table does not list
is refused before any SQL runs, and the UPDATE itself only matches rows still in a state the table
allows the move from. Rows without a status column (no ``STATE_MACHINE``) are guarded by their
``version`` alone. Writers that need one hand-written statement (``UPDATE … RETURNING`` over many
rows) take the allowed source states from ``transition_sources`` so the table still decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any, cast

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from .errors import Conflict, VersionConflict


def state_machine(model: type[models.Model]) -> tuple[str, dict[str, set[str]]] | None:
    """``(status column, transitions)`` of ``model``, or None for a row without a status column."""
    return getattr(model, "STATE_MACHINE", None)


def transition_sources(
    model: type[models.Model], target: str, sources: str | Iterable[str] | None = None, *, code: str = ""
) -> list[str]:
    """The states (among ``sources``, default: all) from which ``model``'s table allows ``target``
    (a live state may also "move" to itself: a stay).

    Raises a typed Conflict (``code``, default ``<MODEL>_TRANSITION_INVALID``) when there is none.
    """
    machine = state_machine(model)
    if machine is None:
        raise TypeError(f"{model.__name__} has no state machine")
    _field, table = machine
    if sources is None:
        candidates = list(table)
    else:
        candidates = [sources] if isinstance(sources, str) else list(sources)
    # Writing the state a live row already has is a stay, not a move (other columns change); a
    # terminal row (no moves out) is never rewritten through its status.
    allowed = [str(s) for s in candidates if target in table.get(s, ()) or (s == target and table.get(s))]
    if not allowed:
        shown = "/".join(str(s) for s in candidates) or "?"
        raise Conflict(
            f"{model.__name__} cannot move from {shown} to {target}.",
            code=code or f"{model.__name__.upper()}_TRANSITION_INVALID",
        )
    return allowed


def sql_states(states: str | Iterable[str]) -> str:
    """``states`` as the literals of an SQL ``IN (…)`` list, for a hand-written statement's fixed text (so it
    can stay one prepared statement). Only for the tables' own ``TextChoices`` values, never for input."""
    states = [states] if isinstance(states, str) else list(states)
    for state in states:
        if not str(state).replace("_", "").isalnum():
            raise ValueError(f"not a state: {state!r}")
    return ", ".join(f"'{state}'" for state in states)


@cache
def _auto_now_fields(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(f.attname for f in model._meta.concrete_fields if getattr(f, "auto_now", False))


def _stamped(model, changes: dict) -> dict:
    """``changes`` with the row's ``auto_now`` columns (``updated_at``) set to now: Django sets them in
    ``save()`` only, and a CAS is an UPDATE, so without this a status change would not move what readers
    show as "last changed" (FHIR ``meta.lastUpdated``, the console's times)."""
    now = timezone.now()
    return {**{name: now for name in _auto_now_fields(model) if name not in changes}, **changes}


def _status_filter(model, changes: dict, expected_status) -> dict:
    """The status filter for a write: the table's sources when the status changes, else the expected ones."""
    machine = state_machine(model)
    if machine is None:
        return {}
    field = machine[0]
    if field in changes:
        return {f"{field}__in": transition_sources(model, changes[field], expected_status)}
    if expected_status is not None:
        return {f"{field}__in": [expected_status] if isinstance(expected_status, str) else list(expected_status)}
    return {}


def cas_update(
    instance: Any,  # a model with ``version`` (and ``status`` when expected_status is given)
    *,
    expected_status: str | Iterable[str] | None = None,
    expected_version: int | None = None,
    pk=None,
    fence: dict | Q | None = None,
    **changes,
) -> None:
    """Write ``changes``, ``version + 1`` and the row's ``updated_at`` in one UPDATE, only if the move is in
    the model's table, the row is still in an allowed state, at the expected version and inside ``fence``
    (extra filters such as a lease owner). Otherwise nothing is written and a typed Conflict is raised.

    ``instance`` is a loaded row (its ``version`` is the expected one and it is refreshed in place on
    success), or a model class with ``pk`` for a row the caller only knows by id (then ``fence`` and
    ``expected_version``, if given, are the guard). Without ``expected_status`` a status change is
    checked against the in-memory status, or against every state the table allows it from.
    """
    model: Any
    if isinstance(instance, type):
        model, row_pk, version = instance, pk, expected_version
    else:
        model, row_pk = type(instance), instance.pk
        version = instance.version if expected_version is None else expected_version
        machine = state_machine(model)
        if expected_status is None and machine is not None and machine[0] in changes:
            expected_status = getattr(instance, machine[0])
    flt = {"pk": row_pk, **_status_filter(model, changes, expected_status)}
    if version is not None:
        flt["version"] = version
    guard = fence if isinstance(fence, Q) else Q(**(fence or {}))
    changes = _stamped(model, changes)
    if not _moved(model, guard, flt, changes):
        raise _why(model, row_pk, version, flt)
    if not isinstance(instance, type):
        for key, value in changes.items():
            setattr(instance, key, value)
        instance.version = cast(int, version) + 1


def _moved(model: Any, guard: Q, flt: dict, changes: dict) -> bool:
    """The one UPDATE of a single-row CAS: ``changes`` (stamped) and ``version + 1`` on the row ``flt`` finds inside
    ``guard``; whether it moved."""
    return model._default_manager.filter(guard, **flt).update(version=F("version") + 1, **changes) == 1


def cas_update_all(queryset: models.QuerySet, *, expected_status=None, **changes) -> int:
    """The bulk form: one UPDATE of every row of ``queryset`` that may make the move (``version + 1`` and
    ``updated_at`` too); returns how many did.

    Rows in a state the table does not allow the move from are left as they are (the count says so).
    """
    flt = _status_filter(queryset.model, changes, expected_status)
    return queryset.filter(**flt).update(version=F("version") + 1, **_stamped(queryset.model, changes))


def cas_update_settling(
    model: type[models.Model], *, pk, fence: Q, settle: models.QuerySet, settled: dict,
    expected_status: str | Iterable[str] | None = None, **changes,
) -> bool:
    """A row known by id moved as ``cas_update`` moves it (``version + 1``, ``updated_at``, the move checked against
    the model's table before any SQL), only inside ``fence``; once it is, the bulk move it settles:
    ``cas_update_all(settle, **settled)``. One command for a move and what it settles (a job's fenced completion
    and its scope's older asks). False, nothing written, when the row is no longer in an allowed state or outside
    ``fence`` (no diagnosis is read: the caller knows its guard); a move the table does not list still raises."""
    flt = {"pk": pk, **_status_filter(model, changes, expected_status)}
    if not _moved(model, fence, flt, _stamped(model, changes)):
        return False
    cas_update_all(settle, **settled)
    return True


def cas_conflict(model: type[models.Model], row_pk, *, version: int | None, sources: list[str]) -> Conflict:
    """The typed Conflict of a hand-written CAS (``UPDATE … WHERE pk, version, status IN (sources)``, the sources
    from ``transition_sources``) that changed no row: the same diagnosis ``cas_update`` raises."""
    machine = state_machine(model)
    flt = {f"{machine[0]}__in": sources} if machine else {}
    return _why(model, row_pk, version, flt)


def _why(model, row_pk, version, flt: dict) -> Conflict:
    """Name the guard that failed (only on the failure path: the success path is one statement)."""
    machine = state_machine(model)
    field = machine[0] if machine else None
    current = model._default_manager.filter(pk=row_pk).values(*(["version", field] if field else ["version"])).first()
    name = model.__name__
    if current is None or (version is not None and current["version"] != version):
        return VersionConflict(f"{name} was changed by someone else.")
    if field and current[field] not in flt.get(f"{field}__in", [current[field]]):
        return Conflict(f"{name} is {current[field]}.", code="STATE_CONFLICT")
    return Conflict(f"{name}'s fence no longer holds.", code="FENCE_LOST")


def check_transition(allowed: dict[str, set[str]], current: str, target: str, *, code: str) -> None:
    """Refuse a move that the state machine does not list (a friendlier code before the CAS runs)."""
    if target not in allowed.get(current, set()):
        raise Conflict(f"Cannot move from {current} to {target}.", code=code)
