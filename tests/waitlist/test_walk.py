"""The walk of ``vacancy_dispatch_by_id`` (issue 42): module changes along one background dispatch, measured on a
real run (``tests/support/walk.py``: the reader's walk; docs/architecture.md says how). The ceilings are the walk
as it is, so it cannot grow unseen; the issue's target is at most 20 returns and 4 visits a module, which the
dispatch that finds nobody meets (the one that makes an offer does not yet: docs/architecture.md says why)."""

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
    assert walk.returns <= 34 and max(walk.visits.values()) <= 11, walk.report()
    assert {"waitlist/dispatch/offer_write.py", "waitlist/queries.py"} <= set(walk.visits)
    # The context is read once, before matching: the command, the context and the candidate loop within the target.
    for module in ("waitlist/dispatch/vacancies.py", "waitlist/dispatch/context.py", "waitlist/dispatch/promotion.py"):
        assert walk.visits[module] <= 4, walk.report()


def test_a_dispatch_that_finds_nobody(world):
    """Someone waits, but for another treatment: the matcher reads and nobody is offered."""
    world.waiting(treatment=world.other_treatment)
    walk, result = _walk(open_vacancy(world))
    assert result.outcome == "NO_CANDIDATE"
    assert walk.returns <= 16 and max(walk.visits.values()) <= 4, walk.report()
    assert "waitlist/dispatch/offer_write.py" not in walk.visits
