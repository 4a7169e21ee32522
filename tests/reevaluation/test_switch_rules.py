"""Mode and drain switches: the rollout order, the allowed next moves, and typed refusal of a no-op."""

from __future__ import annotations

import itertools

import pytest

from common.errors import Conflict
from common.models import AuditEntry
from reevaluation.models import ROLLOUT_ORDER, ClinicReevaluationSettings, DrainState, drain_moves, mode_moves
from reevaluation.modes.services import rollout_path
from reevaluation.services import drain_set, mode_set
from tests.reevaluation import factories as rf

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("current", "moves"),
    [
        ("DISABLED", ["DRY_RUN"]),
        ("DRY_RUN", ["DISABLED", "APPLY_PROPOSED"]),
        ("APPLY_PROPOSED", ["DISABLED", "DRY_RUN", "APPLY_PROPOSED_AND_HELD"]),
        ("APPLY_PROPOSED_AND_HELD", ["DISABLED", "APPLY_PROPOSED"]),
    ],
)
def test_mode_moves_follow_the_rollout_order_with_rollback_to_disabled(current, moves):
    assert mode_moves(current) == moves


def test_mode_set_accepts_exactly_the_offered_moves(world, admin):
    for current, target in itertools.product(ROLLOUT_ORDER, ROLLOUT_ORDER):
        rf.enable(world.clinic, current)
        if target in mode_moves(current):
            mode_set(clinic=world.clinic, mode=target, actor=admin, reason="rollout step")
            assert ClinicReevaluationSettings.objects.get(clinic=world.clinic).mutation_mode == target
        else:
            with pytest.raises(Conflict) as err:
                mode_set(clinic=world.clinic, mode=target, actor=admin, reason="rollout step")
            expected = "MODE_UNCHANGED" if target == current else "MODE_TRANSITION_INVALID"
            assert err.value.code == expected, (current, target)
            assert ClinicReevaluationSettings.objects.get(clinic=world.clinic).mutation_mode == current


def test_a_no_op_mode_change_is_refused_and_not_audited(world, admin):
    rf.enable(world.clinic, "DRY_RUN")
    with pytest.raises(Conflict) as err:
        mode_set(clinic=world.clinic, mode="DRY_RUN", actor=admin, reason="again")
    assert err.value.code == "MODE_UNCHANGED" and err.value.status_code == 409
    assert not AuditEntry.objects.exists()


def test_a_no_op_drain_change_is_refused_and_not_audited(world, admin):
    rf.enable(world.clinic, "DRY_RUN")
    with pytest.raises(Conflict) as err:
        drain_set(clinic=world.clinic, state="ACTIVE", actor=admin, reason="again")
    assert err.value.code == "DRAIN_UNCHANGED"
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("current", "leases", "moves"),
    [
        ("ACTIVE", False, ["DRAINING"]),
        ("DRAINING", True, ["ACTIVE"]),
        ("DRAINING", False, ["ACTIVE", "DRAINED"]),
        ("DRAINED", False, ["ACTIVE"]),
    ],
)
def test_drain_moves_never_offer_what_the_server_refuses(current, leases, moves):
    assert drain_moves(current, leases_active=leases) == moves


def test_rollout_path_walks_one_step_at_a_time():
    assert rollout_path("DISABLED", "APPLY_PROPOSED_AND_HELD") == list(ROLLOUT_ORDER[1:])
    assert rollout_path("APPLY_PROPOSED_AND_HELD", "DRY_RUN") == ["APPLY_PROPOSED", "DRY_RUN"]
    for current, target in itertools.product(ROLLOUT_ORDER, ROLLOUT_ORDER):
        state = current
        for step in rollout_path(current, target):
            assert step in mode_moves(state)
            state = step
        assert state == target


def test_an_admin_resume_clears_the_drain_cause(world, admin):
    rf.enable(world.clinic, "DRY_RUN")
    drain_set(clinic=world.clinic, state="DRAINING", actor=admin, reason="deploy")
    row = ClinicReevaluationSettings.objects.get(clinic=world.clinic)
    assert (row.drain_state, row.drain_cause) == (DrainState.DRAINED, "ADMIN")
    drain_set(clinic=world.clinic, state="ACTIVE", actor=admin, reason="deploy done")
    row.refresh_from_db()
    assert (row.drain_state, row.drain_cause) == (DrainState.ACTIVE, "")
