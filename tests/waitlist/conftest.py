"""Waitlist fixtures: a frozen clock, a world, and dispatch queued on commit recorded (no broker)."""

from __future__ import annotations

import pytest

from tests.conftest import token_client
from tests.support.waitlist_fixtures import frozen_clock, queued_dispatches  # noqa: F401 - used below and by tests
from tests.worlds import waitlist_world


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
