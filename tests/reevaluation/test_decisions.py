"""The reevaluation's decisions as plain functions: every combination of the facts they read, no database."""

from __future__ import annotations

import ast
import itertools
import pathlib
from types import SimpleNamespace

import pytest

from reevaluation.assessment import Constraints
from reevaluation.decisions import (
    Slot,
    applies,
    confirmed_outcome,
    fits,
    held_outcome,
    needs_staff,
    proposed_outcome,
    quiet,
    replacement_treatment,
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
