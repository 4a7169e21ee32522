"""The walk of ``vacancy_dispatch_by_id`` (issue 42): module changes along one background dispatch, measured on a
real run (``tests/support/walk.py``; docs/architecture.md says how). The issue's guard, at most 20 returns and no
module visited more than 4 times, holds on the app's own walk (``walk.own()``: the module changes inside
``waitlist``). The reader's walk, which also counts each call out to ``common`` and scheduling as one stay, is kept
at its ceilings so it cannot grow unseen."""

from __future__ import annotations

import pytest

from tests.support.walk import Walk
from tests.waitlist.loop_helpers import open_vacancy
from waitlist import services
from waitlist.models import EntryStatus, OfferStatus

pytestmark = pytest.mark.django_db


def _walk(vacancy) -> tuple[Walk, services.DispatchResult]:
    with Walk("waitlist") as walk:
        result = services.vacancy_dispatch_by_id(vacancy_id=vacancy.pk)
    return walk, result


def test_a_dispatch_that_makes_an_offer(world):
    first = world.waiting()
    world.waiting()
    walk, result = _walk(open_vacancy(world))
    assert result.outcome == "OFFERED" and result.offer.entry_id == first.pk
    assert result.offer.status == OfferStatus.OFFERED
    first.refresh_from_db()
    assert first.status == EntryStatus.OFFERED
    own = walk.own()
    assert own.returns <= 18 and max(own.visits.values()) <= 4, own.report()  # the guard: 20 and 4
    assert walk.returns <= 31 and max(walk.visits.values()) <= 8, walk.report()
    # Read, decide, write under the fence: the fence's read, the offer's terms and the offer's statement.
    assert {"waitlist/dispatch/offer_write.py", "waitlist/dispatch/fence.py", "waitlist/rules/terms.py",
            "waitlist/queries.py"} <= set(own.visits), own.report()


def test_a_dispatch_that_finds_nobody(world):
    """Someone waits, but for another treatment: the matcher reads and nobody is offered."""
    world.waiting(treatment=world.other_treatment)
    walk, result = _walk(open_vacancy(world))
    assert result.outcome == "NO_CANDIDATE"
    own = walk.own()
    assert own.returns <= 8 and max(own.visits.values()) <= 3, own.report()
    assert walk.returns <= 15 and max(walk.visits.values()) <= 4, walk.report()
    assert "waitlist/dispatch/offer_write.py" not in walk.visits


def test_the_apps_own_walk_leaves_out_the_calls_out_of_the_app():
    """The measure itself, on planted stays: another app's and common's stays drop out, and the stays on either
    side of them, in one module, become one."""
    walk = Walk("waitlist")
    for module in ["waitlist/a.py", "common/x.py", "waitlist/a.py", "scheduling/y.py", "waitlist/b.py",
                   "waitlist/a.py"]:
        walk._stay(module)
    own = walk.own()
    assert own.stays == ["waitlist/a.py", "waitlist/b.py", "waitlist/a.py"]
    assert (walk.returns, own.returns) == (2, 1)
