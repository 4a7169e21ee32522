"""The fairness figures the console and the ops snapshot show are computed once per cache bucket (issue 27):
at a busy clinic the pass-over count is seconds of SQL, and the waitlist page asked for it on every load."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import seoul
from tests.waitlist.loop_helpers import open_vacancy
from waitlist import services, tasks
from waitlist.figures.fairness import fairness_metrics, fairness_metrics_cached


def offer_passing_over_a_longer_waiter(world):
    world.waiting(waiting_since=seoul(1, 9) - timedelta(days=30))
    world.waiting(priority_rank=2)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=open_vacancy(world).ref)
    assert result.outcome == "OFFERED"


def test_within_a_bucket_the_figures_are_read_once(world, frozen_clock, settings):
    settings.WAITLIST_FAIRNESS_CACHE_SECONDS = 30
    offer_passing_over_a_longer_waiter(world)
    first = fairness_metrics_cached(clinic=world.clinic)
    assert {k: v for k, v in first.items() if k != "computed_at"} == fairness_metrics(clinic=world.clinic)
    assert first["passovers"]["total"] == 1 and first["computed_at"] == "2030-12-01T09:00:00+09:00"
    frozen_clock.shift(timedelta(seconds=29))
    with CaptureQueriesContext(connection) as again:
        assert fairness_metrics_cached(clinic=world.clinic) == first
    assert len(again.captured_queries) == 0


def test_older_figures_are_shown_at_once_while_one_background_refresh_computes_new_ones(
        world, frozen_clock, settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.WAITLIST_FAIRNESS_CACHE_SECONDS = 30
    queued = []
    monkeypatch.setattr(tasks.refresh_fairness, "delay", lambda *args: queued.append(args))
    first = fairness_metrics_cached(clinic=world.clinic)
    assert first["passovers"]["total"] == 0
    offer_passing_over_a_longer_waiter(world)
    frozen_clock.shift(timedelta(seconds=30))  # the next bucket: the page does not wait for the SQL
    with CaptureQueriesContext(connection) as stale, django_capture_on_commit_callbacks(execute=True):
        assert fairness_metrics_cached(clinic=world.clinic) == first
        assert fairness_metrics_cached(clinic=world.clinic) == first
    assert len(stale.captured_queries) == 0
    assert queued == [(world.clinic.pk, 30)]  # one refresh for the clinic, however many readers
    tasks.refresh_fairness(*queued[0])
    fresh = fairness_metrics_cached(clinic=world.clinic)
    assert fresh["passovers"]["total"] == 1 and fresh["computed_at"] == "2030-12-01T09:00:30+09:00"
    frozen_clock.shift(timedelta(seconds=30))
    with django_capture_on_commit_callbacks(execute=True):
        fairness_metrics_cached(clinic=world.clinic)
    assert len(queued) == 2  # the refresh let go of its marker: the next bucket queues again


def test_figures_that_took_long_to_compute_are_refreshed_less_often(
        world, frozen_clock, settings, monkeypatch, django_capture_on_commit_callbacks):
    """At a busy clinic the pass-over count is a minute of SQL: a refresh waits 20 times as long as it took."""
    from waitlist.figures import fairness

    settings.WAITLIST_FAIRNESS_CACHE_SECONDS = 30
    queued = []
    monkeypatch.setattr(tasks.refresh_fairness, "delay", lambda *args: queued.append(args))
    readings = iter([100.0, 110.0])  # the computation takes 10 s
    monkeypatch.setattr(fairness, "refresh_clock", lambda: next(readings))
    fairness_metrics_cached(clinic=world.clinic)
    factor = fairness.FAIRNESS_COST_FACTOR
    frozen_clock.shift(timedelta(seconds=factor * 10 - 1))
    with django_capture_on_commit_callbacks(execute=True):
        fairness_metrics_cached(clinic=world.clinic)
    assert queued == []
    frozen_clock.shift(timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        fairness_metrics_cached(clinic=world.clinic)
    assert queued == [(world.clinic.pk, 30)]


def test_zero_turns_the_cache_off(world, frozen_clock, settings):
    settings.WAITLIST_FAIRNESS_CACHE_SECONDS = 0
    offer_passing_over_a_longer_waiter(world)
    fairness_metrics_cached(clinic=world.clinic)
    with CaptureQueriesContext(connection) as again:
        fairness_metrics_cached(clinic=world.clinic)
    assert len(again.captured_queries) == 3


@pytest.fixture
def redis_down(settings):
    from common.degrade import cache_dependency

    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:1/0"}}
    cache_dependency.down = False
    yield
    cache_dependency.down = False


def test_redis_down_computes_the_figures(world, frozen_clock, settings, redis_down):
    settings.WAITLIST_FAIRNESS_CACHE_SECONDS = 30
    offer_passing_over_a_longer_waiter(world)
    assert fairness_metrics_cached(clinic=world.clinic)["passovers"]["total"] == 1
