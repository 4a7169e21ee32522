"""Waitlist fixtures: a frozen clock, a world, and dispatch queued on commit recorded (no broker)."""

from __future__ import annotations

import pytest
import time_machine

from tests.conftest import token_client
from tests.waitlist.factories import NOW
from tests.worlds import waitlist_world
from waitlist import tasks


@pytest.fixture(autouse=True)
def frozen_clock():
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture(autouse=True)
def queued_dispatches(monkeypatch):
    """Vacancy ids whose dispatch was queued after commit (the Celery task is not sent)."""
    calls: list[int] = []
    monkeypatch.setattr(tasks.dispatch_vacancy, "delay", lambda vacancy_id: calls.append(vacancy_id))
    return calls


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
