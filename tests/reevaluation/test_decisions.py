"""The reevaluation's decisions as plain functions: every combination of the facts they read, no database."""

from __future__ import annotations

import itertools

import pytest

from reevaluation.assessment import Constraints
from reevaluation.decisions import (
    Slot,
    applies,
    confirmed_outcome,
    fits,
    held_outcome,
    proposed_outcome,
    quiet,
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
