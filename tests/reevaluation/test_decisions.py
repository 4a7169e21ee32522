"""The reevaluation's decisions as plain functions: every combination of the facts they read, no database."""

from __future__ import annotations

import ast
import itertools
import pathlib
from types import SimpleNamespace

import pytest

from reevaluation.assessment import Constraints
from reevaluation.decisions import (
    EMPTY_TALLY,
    HELD_APPLIED,
    PROPOSED_APPLIED,
    Catalogue,
    Seen,
    Slot,
    Tally,
    applies,
    confirmed_outcome,
    fits,
    held_outcome,
    needs_staff,
    plan,
    proposed_outcome,
    quiet,
    replacement_specs,
    replacement_treatment,
    replacements_wanted,
    tally,
)
from reevaluation.models import MutationMode, Outcome

FACTS = list(itertools.product([False, True], repeat=3))  # (material, fitting, replacement)


@pytest.mark.parametrize(("material", "fitting", "replacement"), FACTS)
def test_a_proposed_appointment_changes_only_when_a_material_change_makes_it_unfit(material, fitting, replacement):
    outcome = proposed_outcome(material=material, fitting=fitting, replacement=replacement)
    if not material or fitting:
        assert outcome == Outcome.SKIPPED_UNCHANGED
    else:
        assert outcome == (Outcome.PROPOSAL_SUPERSEDED if replacement else Outcome.PROPOSAL_NEEDS_STAFF)


@pytest.mark.parametrize(("material", "fitting", "replacement"), FACTS)
def test_a_held_appointment_is_kept_replaced_or_falls_back(material, fitting, replacement):
    outcome = held_outcome(material=material, fitting=fitting, replacement=replacement)
    expected = (Outcome.SKIPPED_UNCHANGED if not material else Outcome.HOLD_KEPT if fitting
                else Outcome.HOLD_REPLACED if replacement else Outcome.FALLBACK_TO_PROPOSED)
    assert outcome == expected


@pytest.mark.parametrize(("material", "fitting", "replacement"), FACTS)
def test_a_confirmed_appointment_is_never_changed_only_proposed_or_asked_about(material, fitting, replacement):
    outcome = confirmed_outcome(material=material, fitting=fitting, replacement=replacement)
    if not material or fitting:
        assert outcome is None
    else:
        assert outcome in (Outcome.CONFIRMED_CHANGE_PROPOSED, Outcome.CONFIRMED_NEEDS_STAFF)
        assert (outcome == Outcome.CONFIRMED_CHANGE_PROPOSED) == replacement


def test_each_mutation_mode_applies_what_its_name_says():
    assert applies(MutationMode.DISABLED) == (False, False)
    assert applies(MutationMode.DRY_RUN) == (False, False)
    assert applies(MutationMode.APPLY_PROPOSED) == (True, False)
    assert applies(MutationMode.APPLY_PROPOSED_AND_HELD) == (True, True)


def test_a_job_is_quiet_only_with_no_target_and_nothing_in_its_scope():
    assert quiet(targets=False, in_scope=False)
    assert not quiet(targets=True, in_scope=False)
    assert not quiet(targets=False, in_scope=True)


def _constraints(**kw) -> Constraints:
    base = {"required_practitioner": None, "allowed_treatments": None, "minimum_slot_minutes": None,
            "resource_need": None}
    return Constraints(**{**base, **kw})


SLOT = Slot(practitioner_ref="pr_a", treatment_ref="tr_a", minutes=30, resource_kind="room")


@pytest.mark.parametrize(("constraints", "expected"), [
    ({}, True),
    ({"required_practitioner": "pr_a"}, True),
    ({"required_practitioner": "pr_b"}, False),
    ({"allowed_treatments": ["tr_a", "tr_b"]}, True),
    ({"allowed_treatments": ["tr_b"]}, False),
    ({"minimum_slot_minutes": 30}, True),
    ({"minimum_slot_minutes": 31}, False),
    ({"resource_need": "room"}, True),
    ({"resource_need": "laser"}, False),
])
def test_a_slot_fits_when_every_named_constraint_holds(constraints, expected):
    assert fits(SLOT, _constraints(**constraints)) is expected


def test_a_slot_without_a_resource_never_fits_a_resource_need():
    assert not fits(Slot("pr_a", "tr_a", 30, None), _constraints(resource_need="room"))


def test_a_run_needs_staff_only_when_one_of_its_outcomes_asks_them():
    assert needs_staff({Outcome.PROPOSAL_NEEDS_STAFF: 1, Outcome.HOLD_KEPT: 2})
    assert needs_staff({Outcome.CONFIRMED_NEEDS_STAFF: 1})
    assert not needs_staff({Outcome.HOLD_REPLACED: 1, Outcome.HOLD_KEPT: 1})
    assert not needs_staff({})


def _treatment(pk, ref, minutes):
    return SimpleNamespace(pk=pk, ref=ref, duration_minutes=minutes)


CATALOGUE = [_treatment(1, "tr_short", 15), _treatment(2, "tr_a", 30), _treatment(3, "tr_b", 60)]


@pytest.mark.parametrize(("constraints", "current", "expected"), [
    ({}, 2, "tr_a"),  # the current treatment still fits: kept
    ({"allowed_treatments": ["tr_b"]}, 2, "tr_b"),  # not allowed any more: the first that fits
    ({"minimum_slot_minutes": 45}, 1, "tr_b"),
    ({"minimum_slot_minutes": 20}, 1, "tr_a"),  # the current is too short: the first long enough, by pk
    ({"allowed_treatments": ["tr_x"]}, 2, None),  # none fits: no replacement
])
def test_a_replacement_keeps_its_treatment_when_it_fits_else_takes_the_first_that_does(constraints, current, expected):
    chosen = replacement_treatment(CATALOGUE, _constraints(**constraints), current)
    assert (chosen.ref if chosen else None) == expected


def test_only_the_first_twenty_fitting_treatments_are_considered():
    catalogue = [_treatment(pk, f"tr_{pk}", 30) for pk in range(1, 31)]
    assert replacement_treatment(catalogue, _constraints(), 25).ref == "tr_1"
    assert replacement_treatment(catalogue, _constraints(), 20).ref == "tr_20"


def test_the_decisions_module_reads_no_database():
    """No import of the ORM, a connection, a queryset or another module's reads: decisions take facts."""
    tree = ast.parse((pathlib.Path(__file__).resolve().parents[2] / "reevaluation/decisions.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported <= {"__future__", "collections.abc", "dataclasses", "typing", "reevaluation.models"}, imported
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not names & {"objects", "filter", "get", "cursor", "execute", "select_for_update", "save"}


# --- the plan: a job's scope decided at once (decisions.plan) -----------------------------------------------------

DR_A, DR_B = SimpleNamespace(pk=1, ref="pr_a"), SimpleNamespace(pk=2, ref="pr_b")
ROOM, LASER_1, LASER_2 = (SimpleNamespace(pk=1, kind="room"), SimpleNamespace(pk=2, kind="laser"),
                          SimpleNamespace(pk=3, kind="laser"))


def _seen(ref: str, *, held: bool = False, practitioner=DR_A, resource=None):
    row = SimpleNamespace(ref=ref)
    slot = Slot(practitioner.ref, "tr_a", 30, resource.kind if resource is not None else None)
    return Seen(row=row, ref=ref, held=held, slot=slot, practitioner=practitioner, treatment_id=2, resource=resource)


def _plan(current=(), gone=(), confirmed=(), *, material=True, catalogue=None, **constraints):
    return plan(material=material, constraints=_constraints(**constraints), current=list(current), gone=list(gone),
                confirmed=list(confirmed), catalogue=catalogue)


def _steps(p):
    return [(s.row.ref, s.outcome, len(s.specs), s.fallback) for s in p.steps]


def test_a_plan_names_every_appointment_in_write_order_with_its_fallback():
    catalogue = Catalogue(practitioners=[DR_B], treatments=CATALOGUE)
    gone = SimpleNamespace(ref="ap_gone")
    p = _plan([_seen("ap_p"), _seen("ap_h", held=True)], [gone], [_seen("ap_c"), _seen("ap_gone")],
              catalogue=catalogue, required_practitioner="pr_b")
    assert _steps(p) == [
        ("ap_gone", Outcome.SKIPPED_INELIGIBLE, 0, None),  # a target gone; as CONFIRMED it is left alone
        ("ap_p", Outcome.PROPOSAL_SUPERSEDED, 1, None),
        ("ap_h", Outcome.HOLD_REPLACED, 1, Outcome.FALLBACK_TO_PROPOSED),
        ("ap_c", Outcome.CONFIRMED_CHANGE_PROPOSED, 1, Outcome.CONFIRMED_NEEDS_STAFF),
    ]
    assert [s.applied_in for s in p.steps] == [(), PROPOSED_APPLIED, HELD_APPLIED, PROPOSED_APPLIED]
    assert p.steps[1].specs[0] == {"practitioner": DR_B, "treatment": CATALOGUE[1], "resource": None}
    assert p.tally == Tally({"CONFIRMED_CHANGE_PROPOSED": 1, "HOLD_REPLACED": 1, "PROPOSAL_SUPERSEDED": 1,
                             "SKIPPED_INELIGIBLE": 1}, needs_staff=False)


def test_a_plan_without_a_replacement_falls_back_or_asks_staff():
    p = _plan([_seen("ap_p"), _seen("ap_h", held=True)], confirmed=[_seen("ap_c")],
              catalogue=Catalogue(practitioners=(), treatments=CATALOGUE), required_practitioner="pr_gone")
    assert [(ref, outcome) for ref, outcome, _, _ in _steps(p)] == [
        ("ap_p", Outcome.PROPOSAL_NEEDS_STAFF), ("ap_h", Outcome.FALLBACK_TO_PROPOSED),
        ("ap_c", Outcome.CONFIRMED_NEEDS_STAFF)]
    assert p.tally.needs_staff


def test_without_a_material_change_nothing_is_sought_and_confirmed_ones_are_left():
    kwargs = {"material": False, "required_practitioner": "pr_b"}
    current, confirmed = [_seen("ap_p"), _seen("ap_h", held=True)], [_seen("ap_c")]
    assert not replacements_wanted(constraints=_constraints(required_practitioner="pr_b"), current=current, gone=[],
                                   confirmed=confirmed, material=False)
    assert [s.outcome for s in _plan(current, confirmed=confirmed, **kwargs).steps] == [
        Outcome.SKIPPED_UNCHANGED, Outcome.SKIPPED_UNCHANGED]


def test_the_catalogue_is_wanted_only_when_an_appointment_no_longer_fits():
    def wanted(current=(), gone=(), confirmed=(), **constraints):
        return replacements_wanted(material=True, constraints=_constraints(**constraints), current=list(current),
                                   gone=list(gone), confirmed=list(confirmed))

    assert not wanted([_seen("ap_p")], required_practitioner="pr_a")
    assert wanted([_seen("ap_p")], required_practitioner="pr_b")
    assert wanted(confirmed=[_seen("ap_c")], required_practitioner="pr_b")
    assert not wanted(gone=[SimpleNamespace(ref="ap_c")], confirmed=[_seen("ap_c")], required_practitioner="pr_b")
    with pytest.raises(ValueError):
        _plan([_seen("ap_p")], required_practitioner="pr_b")  # sought without the catalogue it needs


def test_a_replacement_tries_the_needed_resources_own_first_else_keeps_the_appointments():
    catalogue = Catalogue(treatments=CATALOGUE, resources=[LASER_1, LASER_2])
    own = _seen("ap_h", held=True, resource=LASER_2)
    assert [s["resource"] for s in replacement_specs(own, _constraints(resource_need="laser"), catalogue)] == [
        LASER_2, LASER_1]
    roomed = _seen("ap_h", held=True, resource=ROOM)
    assert [s["resource"] for s in replacement_specs(roomed, _constraints(allowed_treatments=["tr_b"]), catalogue)] == [
        ROOM]
    assert replacement_specs(roomed, _constraints(resource_need="laser"), Catalogue(treatments=CATALOGUE)) == ()
    assert replacement_specs(roomed, _constraints(allowed_treatments=["tr_x"]), catalogue) == ()


def test_an_empty_tally_asks_nothing():
    assert EMPTY_TALLY == tally(()) == Tally({}, needs_staff=False)
    assert tally([Outcome.HOLD_KEPT, Outcome.PROPOSAL_NEEDS_STAFF, Outcome.HOLD_KEPT]) == Tally(
        {"HOLD_KEPT": 2, "PROPOSAL_NEEDS_STAFF": 1}, needs_staff=True)
