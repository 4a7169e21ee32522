"""The fairness figures the console and the ops snapshot show are computed once per cache bucket (issue 27):
at a busy clinic the pass-over count is seconds of SQL, and the waitlist page asked for it on every load."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import seoul
from tests.waitlist.loop_helpers import open_vacancy
from waitlist import services
from waitlist.fairness import fairness_metrics, fairness_metrics_cached


def offer_passing_over_a_longer_waiter(world):
    world.waiting(waiting_since=seoul(1, 9) - timedelta(days=30))
    world.waiting(priority_rank=2)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=open_vacancy(world).ref)
    assert result.outcome == "OFFERED"


def test_within_a_bucket_the_figures_are_read_once_then_recomputed_in_the_next(world, frozen_clock, settings):
    settings.WAITLIST_FAIRNESS_CACHE_SECONDS = 30
    offer_passing_over_a_longer_waiter(world)
    first = fairness_metrics_cached(clinic=world.clinic)
    assert first == fairness_metrics(clinic=world.clinic)
    assert first["passovers"]["total"] == 1
    with CaptureQueriesContext(connection) as again:
        assert fairness_metrics_cached(clinic=world.clinic) == first
    assert len(again.captured_queries) == 0
    frozen_clock.shift(timedelta(seconds=30))  # the next bucket: computed again
    with CaptureQueriesContext(connection) as later:
        fairness_metrics_cached(clinic=world.clinic)
    assert len(later.captured_queries) == 3


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
