"""Waitlist fixtures: a frozen clock, a world, and dispatch queued on commit recorded (no broker)."""

from __future__ import annotations

import pytest

from tests.conftest import seoul, token_client
from tests.support.waitlist_fixtures import frozen_clock, queued_dispatches  # noqa: F401 - used below and by tests
from tests.worlds import waitlist_world
from waitlist.models import Offer


@pytest.fixture(autouse=True)
def _frozen_clock_and_no_broker(frozen_clock, queued_dispatches):
    """Every waitlist test: the clock stands still, dispatch queued on commit is recorded, not sent."""


@pytest.fixture
def on_commit(django_capture_on_commit_callbacks):
    """``with on_commit(execute=True):`` runs what the block queued for after commit."""
    return django_capture_on_commit_callbacks


@pytest.fixture
def world(db):
    return waitlist_world()


@pytest.fixture
def staff_api(world):
    return token_client(world.staff)


@pytest.fixture
def offer(world):
    """An OFFERED offer made the way production makes one: cancel over the API, then dispatch."""
    client, base = token_client(world.staff), f"/api/v1/clinics/{world.clinic.ref}"
    world.waiting(practitioner=world.doctor)
    appointment = world.confirmed(seoul(3, 10))
    cancelled = client.post(f"{base}/appointments/{appointment.ref}/cancel", {"reason": "x"}, format="json")
    dispatched = client.post(f"{base}/vacancies/{cancelled.json()['vacancy']}/dispatch", format="json")
    return Offer.objects.get(ref=dispatched.json()["offer"])
