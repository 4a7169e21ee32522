"""Fixtures shared by the console's waitlist tests. Import them into a test module by name
(``from tests.operations.waitlist_fixtures import frozen_clock, no_broker, world  # noqa: F401``):
the autouse ones then apply to that module only."""

from __future__ import annotations

import pytest
import time_machine

from tests.waitlist.factories import NOW
from tests.worlds import waitlist_world


@pytest.fixture(autouse=True)
def frozen_clock():
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """Dispatch after commit is not sent to a broker (the tests call the services directly)."""
    from waitlist import tasks

    monkeypatch.setattr(tasks.dispatch_vacancy, "delay", lambda vacancy_id: None)


@pytest.fixture
def world(clinic, staff):
    return waitlist_world(clinic, staff)
