"""/metrics at many clinics (issue 27): the grouped gauges agree with the per-clinic selectors, and a scrape's
statement count does not grow with the number of clinics."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from interop.selectors import subscription_health
from observability.metrics import GAUGES, Scope, domain_samples
from reevaluation import selectors as reevaluation_selectors
from scheduling.models import Clinic
from tests.conftest import seoul
from tests.reevaluation.factories import bulk_jobs, enable
from tests.waitlist.loop_helpers import make_offer, open_vacancy
from tests.worlds import waitlist_world
from waitlist.figures import metrics as waitlist_selectors
from waitlist.models import ACTIVE_OFFER_STATUSES, BookingReliabilityDecision, Offer, Vacancy

pytestmark = [pytest.mark.usefixtures("frozen_clock", "no_broker"), pytest.mark.django_db]


def per_clinic_reference(clinic: Clinic, now) -> dict:
    """The gauges of one clinic as the selectors compute them (the scrape's per-clinic code before issue 27)."""
    from django.db.models import Count, Max, Min, Q

    from reevaluation.models import DrainState, JobState, ReevaluationJob
    from waitlist.models import VacancyStatus

    def age(at):
        return max(0.0, (now - at).total_seconds()) if at is not None else None

    out: dict = {}

    def add(name, labels, value):
        out[(name, labels)] = float(value)

    vacancies = Vacancy.objects.filter(clinic=clinic).aggregate(
        open=Count("id", filter=Q(status=VacancyStatus.OPEN)),
        review=Count("id", filter=Q(status=VacancyStatus.REVIEW)),
        oldest_review=Min("updated_at", filter=Q(status=VacancyStatus.REVIEW)))
    add("waitlist_vacancies", ("OPEN",), vacancies["open"])
    add("waitlist_vacancies", ("REVIEW",), vacancies["review"])
    add("waitlist_review_oldest_age_seconds", (), age(vacancies["oldest_review"]) or 0)
    add("waitlist_offers_active", (), Offer.objects.filter(clinic=clinic, status__in=ACTIVE_OFFER_STATUSES).count())
    from waitlist.joining.models import UpkeepAsk, UpkeepOutcome

    for outcome in UpkeepOutcome.values:
        add("waitlist_upkeep_questions", (outcome,), UpkeepAsk.objects.filter(clinic=clinic, outcome=outcome).count())
    outbox = waitlist_selectors.outbox_health(clinic=clinic, now=now)
    add("waitlist_outbox_backlog", (), outbox["pending"])
    add("waitlist_outbox_dead", (), outbox["dead"])
    add("waitlist_outbox_oldest_pending_age_seconds", (), outbox["oldest_pending_age_seconds"] or 0)
    add("waitlist_notice_provider_failures", (), waitlist_selectors.notice_provider_failures(clinic=clinic)["failures"])
    fhir = subscription_health(clinic=clinic, now=now)
    for status, count in fhir["subscriptions"].items():
        add("fhir_subscriptions", (status,), count)
    add("fhir_notifications_undelivered", (), fhir["pending"])
    add("fhir_notifications_dead", (), fhir["dead"])
    add("fhir_notification_oldest_undelivered_age_seconds", (), fhir["oldest_pending_age_seconds"] or 0)
    for freshness, count in waitlist_selectors.decision_freshness(clinic=clinic, now=now).items():
        add("waitlist_decisions", (freshness,), count)
    newest = BookingReliabilityDecision.objects.filter(clinic=clinic).aggregate(at=Max("received_at"))["at"]
    if newest is not None:
        add("waitlist_decision_feed_age_seconds", (), age(newest))
    fill = waitlist_selectors.fill_metrics(clinic=clinic, now=now)
    for outcome, count in fill["vacancies"].items():
        add("waitlist_window_vacancies", (outcome,), count)
    if fill["fill_rate"] is not None:
        add("waitlist_fill_rate", (), fill["fill_rate"])
    for quantile, key in (("0.5", "p50"), ("0.9", "p90")):
        if fill["time_to_fill_seconds"][key] is not None:
            add("waitlist_time_to_fill_seconds", (quantile,), fill["time_to_fill_seconds"][key])
    snap = reevaluation_selectors.snapshot(clinic=clinic, now=now, queue_limit=1)
    for state, count in snap["counts"].items():
        add("reevaluation_jobs", (state,), count)
    add("reevaluation_backlog_oldest_age_seconds", (), snap["oldest_backlog_age_seconds"] or 0)
    add("reevaluation_jobs_overdue", (), snap["overdue_count"])
    add("reevaluation_leases_active", (), snap["active_leases"])
    add("reevaluation_leases_expired", (), snap["expired_leases"])
    add("reevaluation_lease_renewal_failures", (), snap["lease_renewal_failures"])
    add("reevaluation_consecutive_assessment_failures", (), snap["consecutive_assessment_failures"])
    add("reevaluation_quarantine_cases", (), snap["quarantine_count"])
    for state in DrainState.values:
        add("reevaluation_drain_state", (state,), 1 if snap["drain_state"] == state else 0)
    stalest = ReevaluationJob.objects.filter(clinic_id=clinic.pk, state=JobState.RUNNING, lease_expires_at__gt=now
                                             ).aggregate(at=Min("lease_renewed_at"), claimed=Min("first_claimed_at"))
    add("reevaluation_lease_oldest_renewal_age_seconds", (), age(stalest["at"] or stalest["claimed"]) or 0)
    return out


def scraped(samples: dict, clinic: Clinic) -> dict:
    """The clinic's samples of one ``domain_samples`` answer, keyed as ``per_clinic_reference``'s."""
    out = {}
    for name, rows in samples.items():
        if GAUGES[name][1][:2] != ("tenant_group", "clinic"):
            continue
        for labels, value in rows:
            if labels[1] == clinic.ref:
                out[(name, tuple(labels[2:]))] = value
    return out


def busy_and_quiet(quiet: int):
    busy = waitlist_world()
    make_offer(busy)
    open_vacancy(busy, seoul(4, 10))  # nobody left to offer it to
    enable(busy.clinic)
    bulk_jobs(busy.clinic, 3)
    lone = waitlist_world()  # a waitlist with a patient waiting, nothing else
    lone.waiting()
    quiet_worlds = [waitlist_world() for _ in range(quiet)]
    for world in quiet_worlds[::2]:
        enable(world.clinic)
    return busy, lone, quiet_worlds


def test_grouped_gauges_equal_the_per_clinic_selectors():
    busy, lone, quiet = busy_and_quiet(3)
    now = timezone.now()
    samples = domain_samples(Scope("*"), now=now)
    for world in (busy, lone, *quiet):
        assert scraped(samples, world.clinic) == per_clinic_reference(world.clinic, now), world.clinic.ref


def test_scrape_statements_do_not_grow_with_quiet_clinics():
    busy_and_quiet(1)
    with CaptureQueriesContext(connection) as few:
        domain_samples(Scope("*"))
    for _ in range(6):
        world = waitlist_world()
        world.waiting()
        enable(world.clinic)
    with CaptureQueriesContext(connection) as many:
        domain_samples(Scope("*"))
    assert len(many.captured_queries) == len(few.captured_queries)
    # A fixed set: the clinics, one grouped query per gauge family (FHIR subscriptions and the clinics whose
    # notice provider failed included), fill metrics (2) for the one busy clinic, the beat job timestamps and the
    # unattributed quarantine count, the upkeep questions.
    assert len(few.captured_queries) <= 19
