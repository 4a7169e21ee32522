"""/metrics: the token, the exported names, tenant scoping, and a query count that ignores row counts."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from observability.metrics import GAUGES, Scope, domain_samples
from reevaluation.models import JobState
from tests.conftest import seoul
from tests.reevaluation.factories import bulk_jobs, enable
from tests.waitlist.loop_helpers import deliver, make_offer, open_vacancy
from tests.worlds import waitlist_world
from waitlist.dispatch.loop import expire_run
from waitlist.models import JobRun

GLOBAL_TOKEN = "global-scrape-token-123"
TENANT_TOKEN = "tenant-scrape-token-456"


pytestmark = pytest.mark.usefixtures("frozen_clock", "no_broker")


@pytest.fixture
def tokens(settings):
    settings.METRICS_CACHE_SECONDS = 0
    return settings


def scrape(token: str | None, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return Client().get("/metrics", **headers, **extra)


def families(response) -> dict:
    return {family.name: family for family in text_string_to_metric_families(response.content.decode())}


def with_token_for(settings, tenant_group_ref: str = "*") -> None:
    settings.METRICS_SCRAPE_TOKENS = [f"*:{GLOBAL_TOKEN}", f"{tenant_group_ref}:{TENANT_TOKEN}"]


@pytest.mark.django_db
@pytest.mark.parametrize("token", [None, "wrong-token", ""])
def test_metrics_without_the_scrape_token_is_401_and_says_nothing(tokens, token):
    with_token_for(tokens)
    response = scrape(token)
    assert response.status_code == 401
    assert b"waitlist_" not in response.content


@pytest.mark.django_db
def test_metrics_without_configured_tokens_refuses_everyone(tokens):
    tokens.METRICS_SCRAPE_TOKENS = []  # production's default
    assert scrape("demo-metrics-token").status_code == 401
    assert scrape(":").status_code == 401


@pytest.mark.django_db
def test_metrics_exports_every_catalogued_gauge_and_request_latency(tokens):
    with_token_for(tokens)
    world = waitlist_world()
    make_offer(world)
    enable(world.clinic)
    expire_run()
    scrape(GLOBAL_TOKEN)  # a first request so the latency histogram has a sample for this view
    response = scrape(GLOBAL_TOKEN)
    assert response.status_code == 200
    exported = families(response)
    for name in GAUGES:
        assert name in exported, name
    latency = exported["http_request_duration_seconds"]
    assert any(s.labels.get("view") == "metrics" for s in latency.samples)


@pytest.mark.django_db
def test_metrics_gauges_carry_the_console_numbers_per_clinic(tokens):
    with_token_for(tokens)
    world = waitlist_world()
    make_offer(world)
    open_vacancy(world, seoul(4, 10))  # a second vacancy, nobody left to offer it to
    enable(world.clinic)
    bulk_jobs(world.clinic, 3)
    samples = domain_samples(Scope("*"))

    def value(name, **labels):
        for values, v in samples[name]:
            if dict(zip(GAUGES[name][1], values, strict=True)) == {"clinic": world.clinic.ref, **labels} | {
                "tenant_group": world.clinic.tenant_group.ref
            }:
                return v
        raise AssertionError(f"{name} {labels} not exported")

    assert value("waitlist_offers_active") == 1
    assert value("waitlist_outbox_backlog") == 1
    assert value("waitlist_vacancies", state="OPEN") == 2
    assert value("reevaluation_jobs", state=JobState.PENDING) == 3
    assert value("reevaluation_drain_state", state="ACTIVE") == 1
    deliver()
    assert dict((v, n) for v, n in domain_samples(Scope("*"))["waitlist_outbox_backlog"])[
        (world.clinic.tenant_group.ref, world.clinic.ref)
    ] == 0


@pytest.mark.django_db
def test_a_tenant_token_sees_only_its_tenant_groups_clinics(tokens):
    mine, theirs = waitlist_world(), waitlist_world()
    with_token_for(tokens, mine.clinic.tenant_group.ref)
    body = scrape(TENANT_TOKEN).content.decode()
    assert mine.clinic.ref in body
    assert theirs.clinic.ref not in body
    assert theirs.clinic.ref in scrape(GLOBAL_TOKEN).content.decode()


@pytest.mark.django_db
def test_metrics_carry_refs_never_patient_or_clinic_names(tokens):
    with_token_for(tokens)
    world = waitlist_world()
    offer = make_offer(world)
    body = scrape(GLOBAL_TOKEN).content.decode()
    patient = offer.entry.patient
    for secret in (patient.display_name, patient.email, world.clinic.name, world.doctor.name):
        assert secret and secret not in body


@pytest.mark.django_db
def test_beat_job_timestamps_are_exported(tokens):
    expire_run()
    samples = dict(domain_samples(Scope("*"))["waitlist_job_last_run_timestamp_seconds"])
    assert samples[("expire",)] == JobRun.objects.get(name="expire").last_run_at.timestamp()


def _fill(world, hours: range) -> None:
    """One offer per hour (each its own slot and outbox row) and ten reevaluation jobs per hour."""
    for hour in hours:
        make_offer(world, starts_at=seoul(5, hour))
    bulk_jobs(world.clinic, len(hours) * 10)


@pytest.mark.django_db
def test_scrape_query_count_does_not_grow_with_the_number_of_rows(tokens):
    world = waitlist_world()
    enable(world.clinic)
    _fill(world, range(9, 10))
    with CaptureQueriesContext(connection) as small:
        domain_samples(Scope("*"))
    _fill(world, range(10, 13))
    deliver()
    with CaptureQueriesContext(connection) as large:
        domain_samples(Scope("*"))
    assert len(large.captured_queries) == len(small.captured_queries)
    assert len(small.captured_queries) <= 25


@pytest.mark.fastpaths
@pytest.mark.django_db(transaction=True)
def test_dispatch_slot_gauges_show_slots_held_and_dispatches_waiting(settings):
    """One slot, held by one connection and waited for by another: the operator sees saturation."""
    import threading

    from tests.support.slots import queued_for_a_slot, slot_held_elsewhere
    from waitlist.dispatch.vacancies import DISPATCH_SLOTS

    settings.WAITLIST_DISPATCH_CONCURRENCY = 1
    settings.WAITLIST_DISPATCH_SLOT_WAIT_SECONDS = 30
    _got, release, done = slot_held_elsewhere(DISPATCH_SLOTS)
    waiter = threading.Thread(target=lambda: (DISPATCH_SLOTS.release(DISPATCH_SLOTS.acquire()), connection.close()))
    waiter.start()

    def gauges() -> dict:
        samples = domain_samples(Scope("*"))
        return {name: samples[name][0][1] for name in
                ("waitlist_dispatch_slots", "waitlist_dispatch_slots_held", "waitlist_dispatch_slot_waiters")}

    try:
        assert queued_for_a_slot(DISPATCH_SLOTS)
        assert gauges() == {"waitlist_dispatch_slots": 1, "waitlist_dispatch_slots_held": 1,
                            "waitlist_dispatch_slot_waiters": 1}
    finally:
        release.set()
        waiter.join(timeout=30)
        assert done.wait(timeout=30)
    assert gauges()["waitlist_dispatch_slots_held"] == 0


@pytest.fixture
def redis_down(settings):
    from common.degrade import cache_dependency

    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:1/0"}}
    cache_dependency.down = False
    yield
    cache_dependency.down = False


def _value(exported: dict, name: str) -> float:
    (sample,) = exported[name].samples
    return sample.value


@pytest.mark.django_db
def test_metrics_answer_with_redis_down_and_report_the_outage(settings, redis_down):
    with_token_for(settings)
    settings.METRICS_CACHE_SECONDS = 10  # the cache is consulted, and it is the thing that is down
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    waitlist_world()
    response = scrape(GLOBAL_TOKEN)
    assert response.status_code == 200
    exported = families(response)
    assert _value(exported, "service_cache_up") == 0
    assert _value(exported, "service_broker_up") == 0
    assert "waitlist_offers_active" in exported and exported["waitlist_offers_active"].samples


@pytest.mark.django_db
def test_metrics_report_beat_and_worker_ages(tokens):
    from datetime import timedelta

    import time_machine
    from django.utils import timezone

    from observability import components

    with_token_for(tokens)
    with time_machine.travel(timezone.now() - timedelta(seconds=400), tick=False):
        components.beat_seen("beat@test", sent=True)
        components.worker_seen("w@test")
    components.beat_seen("beat@test", sent=False)
    exported = families(scrape(GLOBAL_TOKEN))
    assert _value(exported, "service_beat_heartbeat_age_seconds") < 5
    assert 395 <= _value(exported, "service_beat_last_send_age_seconds") <= 405
    assert _value(exported, "service_beat_send_failing") == 1
    assert _value(exported, "service_workers_alive") == 0
    assert 395 <= _value(exported, "service_worker_heartbeat_age_seconds") <= 405
