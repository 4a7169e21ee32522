"""Fixtures for the operability tests (and the FHIR tests, which import them)."""

from __future__ import annotations

import pytest
import time_machine

from tests.waitlist.factories import NOW


@pytest.fixture
def frozen_clock():
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture
def no_dispatch_tasks(monkeypatch):
    """Vacancy dispatch queued on commit is dropped (no broker); tests dispatch explicitly."""
    from waitlist import tasks

    monkeypatch.setattr(tasks.dispatch_vacancy, "delay", lambda vacancy_id: None)
