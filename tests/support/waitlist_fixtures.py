"""The waitlist tests' frozen clock and broker stubs, in one place.

A conftest imports them by name (``from tests.support.waitlist_fixtures import frozen_clock``) to make
them available below it; a module then opts in with ``pytest.mark.usefixtures("frozen_clock",
"no_broker")`` or a test names them. tests/waitlist/conftest.py applies ``frozen_clock`` and
``queued_dispatches`` to every waitlist test; tests/operations/ and tests/observability/ (and the
FHIR tests) opt in per module.

``queued_dispatches`` and ``no_broker`` both keep ``dispatch_vacancy`` (queued after commit) off the
Celery broker: the first records the vacancy ids for the test to assert on, the second drops them
(tests that call the services directly and do not look).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import time_machine

from tests.waitlist.factories import NOW


@pytest.fixture
def frozen_clock():
    """The clock stands still at ``NOW`` (tests/waitlist/factories.py)."""
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


def _stub_dispatch(monkeypatch, send: Callable[[int], object]) -> None:
    from waitlist import tasks

    monkeypatch.setattr(tasks.dispatch_vacancy, "delay", send)


@pytest.fixture
def queued_dispatches(monkeypatch) -> list[int]:
    """Vacancy ids whose dispatch was queued after commit (the Celery task is not sent)."""
    calls: list[int] = []
    _stub_dispatch(monkeypatch, calls.append)
    return calls


@pytest.fixture
def no_broker(monkeypatch) -> None:
    """Dispatch queued after commit is dropped (the Celery task is not sent)."""
    _stub_dispatch(monkeypatch, lambda vacancy_id: None)
