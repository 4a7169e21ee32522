"""GET /api/v1/ops/waitlist: readiness, fill metrics (SQL aggregates) and the keyset action queue."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from common.models import OutboxMessage, OutboxStatus
from tests import factories as f
from tests.conftest import assert_no_pii, seoul, token_client
from tests.waitlist.factories import decide
from tests.waitlist.loop_helpers import deliver, make_offer, open_vacancy
from waitlist import services
from waitlist.figures.metrics import fill_metrics
from waitlist.figures.queue import ops_action_queue
from waitlist.models import DecisionStatus, Vacancy, VacancyStatus

URL = "/api/v1/ops/waitlist"


def fill_world(world, frozen_clock):
    """A: filled 10 minutes after opening. B: declined, then expired, then the list ran out.
    C: sent to staff review (stale decision). One dead notification."""
    a = make_offer(world, starts_at=seoul(3, 10))
    frozen_clock.shift(timedelta(minutes=10))
    services.offer_claim(clinic=world.clinic, offer_ref=a.ref, expected_version=1)
    services.offer_book(clinic=world.clinic, hold_ref=a.hold.ref)

    b1 = make_offer(world, starts_at=seoul(4, 10))
    b = b1.vacancy
    services.offer_decline(clinic=world.clinic, offer_ref=b1.ref)
    world.waiting()
    b2 = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=b.ref).offer
    frozen_clock.move_to(b2.expires_at)
    services.offers_expire_due()
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=b.ref).outcome == "NO_CANDIDATE"
    services.vacancy_close(clinic=world.clinic, vacancy_ref=b.ref, actor=None, reason="gave up")

    stale = world.patient()
    world.waiting(stale, fresh=False, treatment=world.other_treatment)
    decide(stale, DecisionStatus.STALE)
    c = open_vacancy(world, seoul(5, 10), treatment=world.other_treatment)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=c.ref).outcome == "STAFF_REVIEW"
    OutboxMessage.objects.filter(aggregate_ref=b1.ref).update(
        status=OutboxStatus.DEAD, last_error_code="SMTP_UNAVAILABLE"
    )
    return a, b, c


def test_ops_snapshot_metrics_readiness_and_queue(world, staff_api, frozen_clock, django_assert_max_num_queries):
    a, b, c = fill_world(world, frozen_clock)
    services.reconcile_run()
    with django_assert_max_num_queries(27):  # 2 for the texts sources (issue 39)
        response = staff_api.get(URL, {"clinic": world.clinic.ref})
    assert response.status_code == 200, response.content
    body = response.json()
    m = body["metrics"]
    assert m["vacancies"] == {"total": 3, "filled": 1, "closed": 1, "open": 1, "exhausted": 1}
    assert m["fill_rate"] == 0.5
    assert m["time_to_fill_seconds"] == {"p50": 600.0, "p90": 600.0}
    assert m["offers"] == {"total": 3, "open": 0, "accepted": 1, "declined": 1, "expired": 1, "withdrawn": 0}
    assert m["offers_per_vacancy"] == 1.5 and m["acceptance_per_offer"] == round(1 / 3, 4)
    assert m["expired_vs_declined"] == {"expired": 1, "declined": 1}
    assert m["delivery_failures"]["dead"] == 1

    r = body["readiness"]
    assert r["feature_enabled"] is True and r["policy_version"] == 1
    assert r["decision_freshness"]["STALE"] == 1 and r["decision_freshness"]["FRESH"] >= 1
    assert r["outbox"]["dead"] == 1 and r["outbox"]["pending"] == 2
    assert r["outbox"]["oldest_pending_age_seconds"] > 0
    assert set(r["jobs"]) == {"reconcile"} and r["jobs"]["reconcile"]["last_run_at"]

    kinds = [(i["kind"], i["ref"]) for i in body["action_queue"]["items"]]
    assert ("VACANCY_REVIEW", c.ref) in kinds and ("DELIVERY_DEAD", OutboxMessage.objects.get(
        status=OutboxStatus.DEAD).ref) in kinds
    review = next(i for i in body["action_queue"]["items"] if i["kind"] == "VACANCY_REVIEW")
    assert review["reason_code"] == "DECISION_STALE" and review["policy_version"] == 1 and review["decision_ref"]
    patients = list(world.clinic.patients.all())
    assert_no_pii(json.dumps(body), patients)


def test_empty_clinic_has_null_ratios(world, staff_api):
    body = staff_api.get(URL, {"clinic": world.clinic.ref}).json()
    assert body["metrics"]["fill_rate"] is None and body["metrics"]["time_to_fill_seconds"]["p50"] is None
    assert body["action_queue"] == {"items": [], "next": None}
    assert body["readiness"]["policy_version"] is None


def test_ops_endpoint_scope_and_input(world, staff_api):
    outsider = token_client(f.user_with_role(f.ClinicFactory(), f.sm.Role.ADMIN))
    assert outsider.get(URL, {"clinic": world.clinic.ref}).status_code == 404
    assert token_client().get(URL, {"clinic": world.clinic.ref}).status_code == 401
    assert staff_api.get(URL).status_code == 400
    assert staff_api.get(URL, {"clinic": world.clinic.ref, "limit": "0"}).status_code == 400
    junk = staff_api.get(URL, {"clinic": world.clinic.ref, "after": "not|a|cursor"})
    assert junk.status_code == 200  # a malformed cursor reads as the first page


def test_action_queue_keyset_pages(world, frozen_clock):
    for i in range(3):
        frozen_clock.shift(timedelta(minutes=1))
        stale = world.patient()
        world.waiting(stale, fresh=False)
        decide(stale, DecisionStatus.UNAVAILABLE)
        vacancy = open_vacancy(world, seoul(3, 9 + i))
        services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert Vacancy.objects.filter(status=VacancyStatus.REVIEW).count() == 3
    seen, after = [], None
    for _ in range(4):
        page = ops_action_queue(clinic=world.clinic, limit=2, after=after)
        seen += [i["ref"] for i in page["items"]]
        after = page["next"]
        if after is None:
            break
    assert len(seen) == 3 and len(set(seen)) == 3


@pytest.mark.parametrize("window", [1])
def test_metrics_window_excludes_old_vacancies(world, frozen_clock, window):
    make_offer(world)
    frozen_clock.shift(timedelta(days=2))
    metrics = fill_metrics(clinic=world.clinic, window_days=window)
    assert metrics["vacancies"]["total"] == 0 and metrics["window_days"] == 1


def test_delivery_failures_count_failed_attempts(world, settings):
    settings.OUTBOX_MAX_ATTEMPTS = 1
    world.clinic.settings = {"notification": {"provider": "webhook", "webhook_url": "http://127.0.0.1:9/"}}
    world.clinic.save(update_fields=["settings"])
    make_offer(world, world.patient(phone="+821011112222"))
    deliver()
    failures = fill_metrics(clinic=world.clinic)["delivery_failures"]
    assert failures == {"dead": 1, "failed_attempts": 1}
