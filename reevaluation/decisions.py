"""What an assessment means for a job's appointments: the reevaluation's decisions, in plain Python.

No database access of its own. ``plan`` decides every appointment of a job's scope at once, from what the caller
read (the appointments as ``Seen``, the targets gone, the ``Catalogue`` a replacement may take): whether the job is
``quiet`` (nothing to decide), and one ``Step`` per appointment (superseded, replaced, back to PROPOSED, proposed to
the patient, kept, left for staff). The catalogue's sequences may be lazy (the one-by-one write-back hands in
querysets): they are iterated only when a replacement is sought (``replacements_wanted``), each read once. The
one-by-one write-back (``jobs/worker.py``) and the batched rounds (``rounds/services.py``) read their rows their own
way, ask ``plan``, and only carry the steps out. A change can still fail when it is made (a HELD replacement's slot
taken when booked, no time held for the patient): the step names the ``fallback`` the writer then records (for a
HELD one, after trying the next fitting combination).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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


#: The modes that carry out a PROPOSED appointment's change (and a CONFIRMED one's proposal), and a HELD one's.
PROPOSED_APPLIED = (MutationMode.APPLY_PROPOSED, MutationMode.APPLY_PROPOSED_AND_HELD)
HELD_APPLIED = (MutationMode.APPLY_PROPOSED_AND_HELD,)


def applies(mode: str) -> tuple[bool, bool]:
    """(PROPOSED outcomes applied, HELD outcomes applied) in the clinic's mutation ``mode``."""
    return mode in PROPOSED_APPLIED, mode in HELD_APPLIED


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


# --- the plan: every appointment of a job's scope decided at once ------------------------------------------------

@dataclass(frozen=True)
class Seen:
    """One appointment of a job's scope as the caller read it: ``row`` is the caller's own (handed back in the
    plan's steps, never read here); the rest is what the decisions compare and what a replacement keeps."""

    row: Any
    ref: str
    held: bool  # HELD; else PROPOSED (or, passed as ``confirmed``, CONFIRMED)
    slot: Slot
    practitioner: Any  # kept by a replacement when the constraints name none
    treatment_id: int
    resource: Any  # the appointment's resource or None, kept by a replacement when the constraints need none


@dataclass(frozen=True)
class Catalogue:
    """What a replacement may take in the clinic, read for the assessment's constraints: the active practitioner
    they name (a sequence of at most one: empty when they name none, or name one not active), the clinic's
    treatments by id, and the first ten resources of the kind they need, by id. Any of them may be lazy (a
    queryset): ``plan`` iterates one only when a replacement is sought, and only as far as it needs (the
    treatments once the practitioner is found, the resources once a treatment fits)."""

    practitioners: Iterable[Any] = ()
    treatments: Iterable[Any] = ()
    resources: Iterable[Any] = ()


@dataclass(frozen=True)
class Tally:
    """A run's outcomes counted (by outcome, sorted) and whether they ask staff to act (``needs_staff``)."""

    counts: dict[str, int]
    needs_staff: bool


@dataclass(frozen=True)
class Step:
    """What the write step does with one appointment: record ``outcome``, making the change it names where the
    clinic's mode is one of ``applied_in`` (a superseded PROPOSED booked anew as ``specs[0]``; a replaced HELD
    booked as the first of ``specs`` whose slot is still free, tried and undone in a dry run; a HELD back to
    PROPOSED; a CONFIRMED one's patient proposed the times of ``specs``). ``fallback`` is recorded instead when
    the change cannot be made (every fitting slot taken when booked; no time could be held for the patient)."""

    row: Any
    outcome: Outcome
    specs: tuple[dict, ...] = ()
    fallback: Outcome | None = None
    applied_in: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """A job's scope decided: one step per appointment in the order they are written (the targets gone, the PROPOSED
    and HELD ones by id, then the CONFIRMED ones that no longer fit); ``tally`` counts the planned outcomes."""

    steps: tuple[Step, ...]
    tally: Tally
    quiet: bool = False  # nothing to decide (``quiet``): the job completes without locking its head


def tally(outcomes: Iterable[str]) -> Tally:
    """``outcomes`` counted, and whether they need staff."""
    counts: dict[str, int] = {}
    for outcome in sorted(str(o) for o in outcomes):
        counts[outcome] = counts.setdefault(outcome, 0) + 1
    return Tally(counts, needs_staff(counts))


#: What a job with nothing to decide (``quiet``) records: no outcome, no ask of staff.
EMPTY_TALLY = tally(())


def replacement_specs(seen: Seen, c, catalogue: Catalogue | None) -> tuple[dict, ...]:
    """The practitioner/treatment/resource combinations a replacement of ``seen`` may take at its start, in the
    order they are tried: the named practitioner (else the appointment's), ``replacement_treatment``, and each
    resource of the needed kind, the appointment's own first (else the appointment's resource); none when one
    of them is missing."""
    if catalogue is None:
        raise ValueError("a replacement is sought without a catalogue (see replacements_wanted)")
    practitioner = seen.practitioner if c.required_practitioner is None else next(iter(catalogue.practitioners), None)
    if practitioner is None:
        return ()
    treatment = replacement_treatment(catalogue.treatments, c, seen.treatment_id)
    if treatment is None:
        return ()
    if c.resource_need is None:
        resources = [seen.resource]
    else:
        own = seen.resource.pk if seen.resource is not None else None
        resources = sorted(catalogue.resources, key=lambda r: r.pk != own)
    return tuple({"practitioner": practitioner, "treatment": treatment, "resource": r} for r in resources)


def _fitting(seen: Seen, c, decided: set[str]) -> bool:
    """Whether a CONFIRMED appointment is left as it is: it still fits, or it is a target of the job decided with
    the PROPOSED and HELD ones (it became CONFIRMED since intake: SKIPPED_INELIGIBLE, the next revision proposes)."""
    return seen.ref in decided or fits(seen.slot, c)


def _decided(current: Sequence[Seen], gone: Sequence[Any]) -> set[str]:
    return {s.ref for s in current} | {row.ref for row in gone}


def replacements_wanted(*, material: bool, constraints, current: Sequence[Seen], gone: Sequence[Any],
                        confirmed: Sequence[Seen]) -> bool:
    """Whether ``plan`` needs a ``Catalogue``: a material change, and an appointment it compares that no longer
    fits (the caller reads the catalogue only then)."""
    decided = _decided(current, gone)
    return material and (any(not fits(s.slot, constraints) for s in current)
                         or any(not _fitting(s, constraints, decided) for s in confirmed))


def plan(*, material: bool, constraints, current: Sequence[Seen], gone: Sequence[Any], confirmed: Sequence[Seen],
         catalogue: Catalogue | None, targets: Sequence[str] = ()) -> Plan:
    """Decide every appointment of a job's scope: first whether there is anything to decide (``quiet``, from the
    intake ``targets`` and the appointments in scope; a quiet plan has no step), then the PROPOSED and HELD ones now
    (``current``, by id), the intake targets that are neither any more (``gone``, rows: SKIPPED_INELIGIBLE,
    protected), the future CONFIRMED ones (never changed: the patient is proposed a time, or staff are asked; only
    on a material change). ``catalogue`` is what a replacement may take (needed when ``replacements_wanted``).

    The one decision of the one-by-one write-back and of the batched rounds: they read the facts their own way
    and only carry the steps out."""
    if quiet(targets=bool(targets or gone), in_scope=bool(current or confirmed)):
        return Plan(steps=(), tally=EMPTY_TALLY, quiet=True)
    steps = [Step(row, Outcome.SKIPPED_INELIGIBLE) for row in gone]
    for seen in current:
        fitting = fits(seen.slot, constraints)
        specs = replacement_specs(seen, constraints, catalogue) if material and not fitting else ()
        if seen.held:
            outcome = held_outcome(material=material, fitting=fitting, replacement=bool(specs))
            fallback = held_outcome(material=material, fitting=fitting, replacement=False)
            steps.append(Step(seen.row, outcome, specs, fallback, HELD_APPLIED))
        else:
            outcome = proposed_outcome(material=material, fitting=fitting, replacement=bool(specs))
            steps.append(Step(seen.row, outcome, specs, None, PROPOSED_APPLIED))
    decided = _decided(current, gone)
    for seen in confirmed if material else ():
        fitting = _fitting(seen, constraints, decided)
        specs = () if fitting else replacement_specs(seen, constraints, catalogue)
        asked = confirmed_outcome(material=True, fitting=fitting, replacement=bool(specs))
        if asked is not None:  # no longer fits: the patient is proposed a time, or (none held) staff are asked
            unheld = confirmed_outcome(material=True, fitting=fitting, replacement=False)
            steps.append(Step(seen.row, asked, specs, unheld, PROPOSED_APPLIED))
    return Plan(steps=tuple(steps), tally=tally(s.outcome for s in steps))
