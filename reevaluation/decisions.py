"""What an assessment means for one appointment: the reevaluation's decisions, in plain Python.

No database access here. The one-by-one write-back (``services.worker``) and the batched rounds
(``services.rounds``) read their rows their own way, then ask these functions; the first outcome a function
names is the decision, and the caller only carries it out (a replacement booked, a fallback applied, a
proposal opened). A HELD replacement can still find its slot taken when it is booked: the caller then tries
the next fitting combination and, with none left, falls back (``held_outcome(..., replacement=False)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from reevaluation.models import NEEDS_STAFF_OUTCOMES, MutationMode, Outcome

#: A treatment row, or anything with its ``pk``, ``ref`` and ``duration_minutes``.
T = TypeVar("T", bound=Any)


@dataclass(frozen=True)
class Slot:
    """What the constraints are compared with: an appointment's practitioner, treatment, length and resource."""

    practitioner_ref: str
    treatment_ref: str
    minutes: float
    resource_kind: str | None


def fits(slot: Slot, c) -> bool:
    """Whether ``slot`` satisfies the assessment's constraints ``c`` (``assessment.Constraints``)."""
    return (
        (c.required_practitioner is None or slot.practitioner_ref == c.required_practitioner)
        and (c.allowed_treatments is None or slot.treatment_ref in c.allowed_treatments)
        and (c.minimum_slot_minutes is None or slot.minutes >= c.minimum_slot_minutes)
        and (c.resource_need is None or slot.resource_kind == c.resource_need)
    )


def applies(mode: str) -> tuple[bool, bool]:
    """(PROPOSED outcomes applied, HELD outcomes applied) in the clinic's mutation ``mode``."""
    return (mode in (MutationMode.APPLY_PROPOSED, MutationMode.APPLY_PROPOSED_AND_HELD),
            mode == MutationMode.APPLY_PROPOSED_AND_HELD)


def proposed_outcome(*, material: bool, fitting: bool, replacement: bool) -> Outcome:
    """A PROPOSED appointment: unchanged when nothing material changed or it still fits; else superseded by a
    fitting time, or, with none, left for staff."""
    if not material or fitting:
        return Outcome.SKIPPED_UNCHANGED
    return Outcome.PROPOSAL_SUPERSEDED if replacement else Outcome.PROPOSAL_NEEDS_STAFF


def held_outcome(*, material: bool, fitting: bool, replacement: bool) -> Outcome:
    """A HELD appointment: unchanged without a material change; kept while it fits; else replaced at the same
    start by a fitting combination, or, with none free, back to PROPOSED (its capacity released)."""
    if not material:
        return Outcome.SKIPPED_UNCHANGED
    if fitting:
        return Outcome.HOLD_KEPT
    return Outcome.HOLD_REPLACED if replacement else Outcome.FALLBACK_TO_PROPOSED


def confirmed_outcome(*, material: bool, fitting: bool, replacement: bool) -> Outcome | None:
    """A future CONFIRMED appointment is never changed: None while it still fits (or nothing material changed);
    else the patient is proposed a fitting time, or, with none, staff are asked."""
    if not material or fitting:
        return None
    return Outcome.CONFIRMED_CHANGE_PROPOSED if replacement else Outcome.CONFIRMED_NEEDS_STAFF


def quiet(*, targets: bool, in_scope: bool) -> bool:
    """A job with nothing to decide: no appointment named at intake and none in its scope now (PROPOSED, HELD,
    or CONFIRMED ahead). It completes without locking the head."""
    return not targets and not in_scope


def needs_staff(counts: dict) -> bool:
    """Whether a completed run asks staff to act: one of its outcomes does (``NEEDS_STAFF_OUTCOMES``). The newest
    completed run of a scope is the one staff act on, so completing it settles the older asks."""
    return any(outcome in counts for outcome in NEEDS_STAFF_OUTCOMES)


def replacement_treatment(treatments: Iterable[T], c, current_id: int | None) -> T | None:
    """The treatment a replacement takes, of ``treatments`` (the clinic's, by pk): the current one (``current_id``)
    if it is among the first 20 that fit ``c`` (allowed, long enough), else the first of those; None when none
    fits."""
    fitting = [
        t for t in treatments
        if (c.allowed_treatments is None or t.ref in c.allowed_treatments)
        and (c.minimum_slot_minutes is None or t.duration_minutes >= c.minimum_slot_minutes)
    ][:20]
    return next((t for t in fitting if t.pk == current_id), fitting[0]) if fitting else None
