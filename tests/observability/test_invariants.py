"""The invariant checker passes on a healthy offer → claim → book loop and catches planted corruption."""

from __future__ import annotations

import pytest
import time_machine

from observability.invariants import check
from scheduling.models import CapacityAllocation, CapacityHold, HoldStatus
from tests.conftest import seoul
from tests.waitlist.factories import NOW
from tests.waitlist.loop_helpers import claim_path, make_offer, page_client, submit
from tests.worlds import waitlist_world
from waitlist.models import EntryStatus, WaitlistEntry


@pytest.fixture
def world(db):
    with time_machine.travel(NOW, tick=False):
        yield waitlist_world()


def test_a_healthy_claim_and_booking_passes_every_invariant(world):
    with time_machine.travel(NOW, tick=False):
        offer = make_offer(world, world.patient())
        make_offer(world, world.patient(), starts_at=seoul(4, 10))
        submit(page_client(), claim_path(offer), "accept")
        report = check()
    assert report.ok, report.summary()
    assert report.totals["offers"] == 2 and report.totals["confirmed_appointments"] >= 1


def test_an_entry_left_offered_without_its_offer_is_a_violation(world):
    with time_machine.travel(NOW, tick=False):
        entry = world.waiting(world.patient())
    WaitlistEntry.objects.filter(pk=entry.pk).update(status=EntryStatus.OFFERED)
    assert check().failed() == {"offered_entries_without_an_offered_offer": 1}


def test_a_released_hold_that_kept_its_allocation_is_a_violation(world):
    with time_machine.travel(NOW, tick=False):
        offer = make_offer(world, world.patient())
    CapacityHold.objects.filter(pk=offer.hold_id).update(status=HoldStatus.RELEASED)
    failed = check().failed()
    assert failed["released_holds_with_an_active_allocation"] == 1
    assert failed["offered_offers_without_an_active_hold"] == 1


def test_the_check_can_be_limited_to_some_clinics(world):
    with time_machine.travel(NOW, tick=False):
        offer = make_offer(world, world.patient())
    CapacityAllocation.objects.filter(hold_id=offer.hold_id).update(active=False)
    assert not check([world.clinic.pk]).ok
    assert check([world.clinic.pk + 10_000]).ok
