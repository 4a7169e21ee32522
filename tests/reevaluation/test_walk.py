"""The walk of ``job_run_claimed`` (issue 42): module changes along the worker's entry for one job, measured on a
real run (``tests/support/walk.py``; docs/architecture.md says how). The issue's guard, at most 8 returns, holds on
the app's own walk (``walk.own()``: the module changes inside ``reevaluation``) and on the reader's walk, which also
counts each call out to scheduling and ``common`` as one stay. The ceilings are the walks as they are, so they cannot
grow unseen (the worker, the hub of read, decide and write, is visited once per collaborator: docs/architecture.md)."""

from __future__ import annotations

import pytest

from reevaluation.assessment import AssessmentClient
from reevaluation.jobs import worker as worker_module
from reevaluation.models import JobState, Outcome, ReevaluationOutcome
from reevaluation.services import dispatch_round
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event
from tests.support.walk import Walk

pytestmark = pytest.mark.django_db


def _walk(world, crm, **event) -> Walk:
    post_event(world, world.fp, 1, crm, **event)
    [claim] = dispatch_round(for_worker=True)
    client = AssessmentClient()
    with Walk("reevaluation") as walk:
        assert worker_module.job_run_claimed(claim, client=client) == JobState.COMPLETED
    return walk


def test_a_quiet_jobs_walk(world, crm):
    rf.enable(world.clinic, "DRY_RUN")
    walk = _walk(world, crm)
    assert walk.returns <= 7 and max(walk.visits.values()) <= 7, walk.report()
    assert walk.own().returns <= 5 and max(walk.own().visits.values()) <= 5, walk.own().report()
    assert "reevaluation/decisions.py" in walk.visits and "reevaluation/queries.py" in walk.visits


def _full_job(world, crm, mode: str) -> Walk:
    rf.enable(world.clinic, mode)
    world.book("PROPOSED", 9)
    world.book("HELD", 11)
    world.book("CONFIRMED", 14)
    return _walk(world, crm, constraints={"requiredPractitioner": world.dr_b.ref})


def test_a_dry_run_full_jobs_walk(world, crm):
    """The same appointments in DRY_RUN: only the HELD replacement is tried (and undone)."""
    walk = _full_job(world, crm, "DRY_RUN")
    assert walk.returns <= 6 and max(walk.visits.values()) <= 7, walk.report()
    assert walk.own().returns <= 3 and max(walk.own().visits.values()) <= 4, walk.own().report()
    assert walk.visits["scheduling/services/appointments.py"] == 1, walk.report()


def test_a_full_jobs_walk(world, crm):
    """A PROPOSED superseded, a HELD replaced and a CONFIRMED proposed a new time, applied."""
    walk = _full_job(world, crm, "APPLY_PROPOSED_AND_HELD")
    assert walk.returns <= 8 and max(walk.visits.values()) <= 8, walk.report()
    assert walk.own().returns <= 4 and max(walk.own().visits.values()) <= 5, walk.own().report()
    # Every step is on the walk: the job's appointment changes are one scheduling command (its insides are
    # scheduling's walk), then a proposal and its hold. A function called once per step would show only its first
    # call's branch (docs/architecture.md, "The walk of job_run_claimed"): the command is entered once, carrying the
    # PROPOSED's rebooking and the HELD's replacement, both applied.
    assert walk.visits["scheduling/services/appointments.py"] == 1, walk.report()
    assert {"reevaluation/proposals/services.py", "scheduling/services/holds.py"} <= set(walk.visits), walk.report()
    applied = {o.outcome: o for o in ReevaluationOutcome.objects.filter(applied=True)}
    assert applied[Outcome.PROPOSAL_SUPERSEDED].replacement_ref and applied[Outcome.HOLD_REPLACED].replacement_ref
    assert applied[Outcome.CONFIRMED_CHANGE_PROPOSED].proposal is not None


def test_the_walk_counts_returns_and_visits():
    """The measure itself, on planted stays: a return is a stay in a module already left."""
    walk = Walk()
    for module in ["a.py", "b.py", "a.py", "c.py", "a.py", "a.py", "b.py"]:
        walk._stay(module)
    assert walk.stays == ["a.py", "b.py", "a.py", "c.py", "a.py", "b.py"]
    assert (walk.returns, walk.visits["a.py"]) == (3, 3)
