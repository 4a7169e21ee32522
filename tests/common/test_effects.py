"""After-commit effects by name (``common.effects``): services name them, apps register the handlers."""

from __future__ import annotations

import pytest
from django.db import transaction

from common import effects
from common.degrade import broker_dependency

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def recorded():
    calls: list[dict] = []
    effects.register("test.recorded", lambda **ids: calls.append(ids))
    yield calls
    effects._HANDLERS.pop("test.recorded", None)


def test_the_handler_runs_after_commit_with_the_ids(recorded):
    with transaction.atomic():
        effects.after_commit("test.recorded", vacancy_id=7)
        assert recorded == []  # never inside the transaction
    assert recorded == [{"vacancy_id": 7}]


def test_a_rolled_back_transaction_runs_no_effect(recorded):
    with pytest.raises(RuntimeError), transaction.atomic():
        effects.after_commit("test.recorded", vacancy_id=7)
        raise RuntimeError("rolled back")
    assert recorded == []


def test_an_unknown_effect_fails_inside_the_caller():
    with pytest.raises(LookupError), transaction.atomic():
        effects.after_commit("test.nobody_registered_this", vacancy_id=1)


def test_a_failing_handler_never_fails_the_committed_caller():
    def broken(**ids):
        raise ConnectionError("broker down")

    effects.register("test.broken", broken)
    broker_dependency.down = False
    try:
        with transaction.atomic():
            effects.after_commit("test.broken", vacancy_id=1)
        assert broker_dependency.down  # logged once as an outage; the commit stands
    finally:
        effects._HANDLERS.pop("test.broken", None)
        broker_dependency.down = False


def test_the_waitlist_registers_its_dispatch_effect_at_ready():
    from waitlist.effects import DISPATCH_EFFECT

    assert DISPATCH_EFFECT in effects._HANDLERS


def test_waitlist_services_do_not_import_tasks():
    """The layer edge: services name effects; only ``waitlist.apps``/``waitlist.tasks`` know the tasks."""
    from pathlib import Path

    import waitlist

    root = Path(waitlist.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name not in {"apps.py", "tasks.py"} and "migrations" not in p.parts
                 and ("from waitlist import tasks" in p.read_text() or "from waitlist.tasks" in p.read_text()
                      or "import waitlist.tasks" in p.read_text())]
    assert offenders == []
