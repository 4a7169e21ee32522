"""Prometheus metrics: request latency by view, and per-clinic domain gauges read at scrape time.

The domain gauges are the numbers the console already shows, computed by the same selectors
(``waitlist.selectors``, ``reevaluation.selectors``): a fixed number of bounded queries per clinic,
whatever the number of rows (tests/observability/test_metrics.py measures it). The computed samples
are cached for ``METRICS_CACHE_SECONDS`` so several scrapers or web processes do not multiply the cost.

Labels carry refs and states only: no names, no patient data.
"""

from __future__ import annotations

import hmac
import os
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Max, Min, Q
from django.utils import timezone
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from common.degrade import REDIS_ERRORS, cache_dependency, cached_answer
from common.models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from interop.models import NOTIFICATION_TOPIC, Subscription, SubscriptionStatus
from reevaluation.models import ClinicReevaluationSettings, DrainState, JobState, QuarantineCase, ReevaluationJob
from scheduling.models import Clinic
from waitlist.dispatch.vacancies import DISPATCH_SLOTS
from waitlist.figures.metrics import (
    NOTICE_TOPICS,
    decision_freshness_by_clinic,
    fill_metrics,
    notice_provider_failures,
)
from waitlist.joining.models import UpkeepOutcome
from waitlist.joining.upkeep import upkeep_counts
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    OFFER_TOPIC,
    BookingReliabilityDecision,
    JobRun,
    Offer,
    Vacancy,
    VacancyStatus,
)

# --- request latency (per process; gunicorn with several workers: set PROMETHEUS_MULTIPROC_DIR) ---

_process_registry = CollectorRegistry(auto_describe=True)
REQUEST_LATENCY = Histogram(
    "http_request_duration_seconds",
    "Latency of HTTP requests by view (URL name), method and status class.",
    ["view", "method", "status"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=_process_registry,
)


class RequestLatencyMiddleware:
    """Times every request; the label is the matched URL's name, so cardinality is the URL table's."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name or "unnamed") if match else "unmatched"
        REQUEST_LATENCY.labels(view, request.method, f"{response.status_code // 100}xx").observe(
            time.perf_counter() - started
        )
        return response


# --- the catalogue of domain gauges (the alert rules may only name these) ---

C = ("tenant_group", "clinic")

GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "waitlist_vacancies": ("Vacancies waiting for a patient, by state (OPEN, REVIEW).", (*C, "state")),
    "waitlist_offers_active": ("Offers OFFERED or ACCEPTED (not yet booked).", C),
    "waitlist_upkeep_questions": ("Upkeep questions (\"still need an earlier time?\") by outcome: ASKED (open), "
                                  "STILL_NEEDED, NOT_NEEDED (withdrawn), PAUSED (no answer).", (*C, "outcome")),
    "waitlist_review_oldest_age_seconds": ("Age of the oldest vacancy in staff review.", C),
    "waitlist_outbox_backlog": ("Offer notifications PENDING or LEASED.", C),
    "waitlist_outbox_dead": ("Offer notifications DEAD (attempt bound reached).", C),
    "waitlist_outbox_oldest_pending_age_seconds": ("Age of the oldest undelivered offer notification.", C),
    "waitlist_decisions": ("WAITING patients by freshness of their newest reliability decision.", (*C, "freshness")),
    "waitlist_decision_feed_age_seconds": ("Seconds since the clinic's newest booking-reliability decision.", C),
    "waitlist_window_vacancies": ("Vacancies opened in the metrics window, by outcome.", (*C, "outcome")),
    "waitlist_fill_rate": ("FILLED / (FILLED + CLOSED) over the metrics window.", C),
    "waitlist_time_to_fill_seconds": ("Vacancy opened to BOOKED, over the metrics window.", (*C, "quantile")),
    "waitlist_job_last_run_timestamp_seconds": ("Unix time of the last run of a waitlist beat job.", ("job",)),
    "reevaluation_jobs": ("Reevaluation jobs by state.", (*C, "state")),
    "reevaluation_backlog_oldest_age_seconds": ("Age of the oldest PENDING or RETRY_WAIT job.", C),
    "reevaluation_jobs_overdue": ("PENDING or RETRY_WAIT jobs past their due time.", C),
    "reevaluation_leases_active": ("RUNNING jobs holding an unexpired lease.", C),
    "reevaluation_leases_expired": ("RUNNING jobs whose lease expired (a worker died; rescue pending).", C),
    "reevaluation_lease_oldest_renewal_age_seconds": ("Seconds since the stalest active lease was renewed.", C),
    "reevaluation_lease_renewal_failures": ("Lease renewals that failed (clinic counter).", C),
    "reevaluation_consecutive_assessment_failures": ("Consecutive CRM assessment fetch failures.", C),
    "reevaluation_quarantine_cases": ("Quarantine cases attributed to the clinic.", C),
    "reevaluation_quarantine_unattributed": ("Quarantine cases no clinic could be attributed to.", ()),
    "waitlist_dispatch_slots": ("Background dispatches allowed at once (WAITLIST_DISPATCH_CONCURRENCY).", ()),
    "waitlist_dispatch_slots_held": ("Dispatch slots held now, across the deployment.", ()),
    "waitlist_dispatch_slot_waiters": ("Dispatches waiting for a slot now (steadily above 0: slots saturated).", ()),
    "waitlist_notice_provider_failures": ("Failed attempts in a row of the clinic's notice provider (0: it last sent).",
                                          C),
    "fhir_subscriptions": ("The clinic's FHIR rest-hook subscriptions by status (requested, active, error, off).",
                           (*C, "status")),
    "fhir_notifications_undelivered": ("FHIR subscription notifications PENDING or LEASED.", C),
    "fhir_notifications_dead": ("FHIR subscription notifications DEAD (attempt bound reached).", C),
    "fhir_notification_oldest_undelivered_age_seconds": ("Age of the oldest undelivered FHIR notification.", C),
    "reevaluation_drain_state": ("1 for the clinic's current drain state, 0 for the others.", (*C, "state")),
}

#: The background components and dependencies, measured live at every scrape (never from the cache, whose
#: Redis may be the thing that is down). Ages are absent while a component never showed life.
SERVICE_GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "service_broker_up": ("1 when this web process reaches the Celery broker, 0 when not.", ()),
    "service_cache_up": ("1 when the Redis cache answers, 0 when not (domain gauges are then computed uncached).", ()),
    "service_beat_heartbeat_age_seconds": ("Seconds since beat last ticked (its own heartbeat in PostgreSQL).", ()),
    "service_beat_last_send_age_seconds": ("Seconds since beat last handed a task to the broker.", ()),
    "service_beat_send_failing": ("1 when beat's latest send to the broker failed, 0 otherwise.", ()),
    "service_workers_alive": ("Celery workers whose heartbeat is within COMPONENT_STALE_SECONDS.", ()),
    "service_worker_heartbeat_age_seconds": ("Seconds since the most recent heartbeat of any worker.", ()),
}


@dataclass(frozen=True)
class Scope:
    """What one scrape token may see: every clinic (``*``) or one tenant group's."""

    tenant_group: str

    def clinics(self):
        clinics = Clinic.objects.select_related("tenant_group").order_by("pk")
        return clinics if self.tenant_group == "*" else clinics.filter(tenant_group__ref=self.tenant_group)


def scope_for_token(header: str) -> Scope | None:
    """``Authorization: Bearer <token>`` → the scope of the matching ``METRICS_SCRAPE_TOKENS`` entry."""
    prefix = "Bearer "
    if not header.startswith(prefix):
        return None
    presented = header[len(prefix):].strip().encode()
    found = None
    for entry in getattr(settings, "METRICS_SCRAPE_TOKENS", []):
        scope, _, token = entry.partition(":")
        # Compare every entry (constant time each) so timing does not tell which one matched.
        if token and hmac.compare_digest(presented, token.encode()) and found is None:
            found = Scope(scope or "*")
    return found


def _age(now: datetime, at: datetime | None) -> float | None:
    return max(0.0, (now - at).total_seconds()) if at is not None else None


def _by(rows, key: str = "clinic_id") -> dict:
    return {row.pop(key): row for row in rows}


_NO_FILL: dict[str, Any] = {
    "vacancies": {"total": 0, "filled": 0, "closed": 0, "open": 0, "exhausted": 0}, "fill_rate": None,
    "time_to_fill_seconds": {"p50": None, "p90": None},
}


def _clinics_samples(clinics: list[Clinic], now: datetime, add) -> None:
    """All gauges of ``clinics`` with one grouped query per gauge family (the selectors' definitions), so a scrape
    costs a fixed number of statements whatever the number of clinics; only ``fill_metrics`` still runs per
    clinic, and only for a clinic that opened a vacancy in the metrics window (a quiet clinic's are all zero)."""
    if not clinics:
        return
    ids, refs = [c.pk for c in clinics], [c.ref for c in clinics]
    vacancies = _by(Vacancy.objects.filter(clinic_id__in=ids).values("clinic_id").annotate(
        open=Count("id", filter=Q(status=VacancyStatus.OPEN)),
        review=Count("id", filter=Q(status=VacancyStatus.REVIEW)),
        oldest_review=Min("updated_at", filter=Q(status=VacancyStatus.REVIEW)),
    ).order_by())
    offers = dict(Offer.objects.filter(clinic_id__in=ids, status__in=ACTIVE_OFFER_STATUSES).values("clinic_id")
                  .annotate(n=Count("id")).order_by().values_list("clinic_id", "n"))
    live = [OutboxStatus.PENDING, OutboxStatus.LEASED]  # as ``waitlist.selectors.outbox_health``
    outbox: dict[tuple[str, str], dict] = {}
    for row in OutboxMessage.objects.filter(clinic_ref__in=refs, topic__in=[OFFER_TOPIC, NOTIFICATION_TOPIC]).values(
        "clinic_ref", "topic").annotate(
        pending=Count("id", filter=Q(status__in=live)),
        dead=Count("id", filter=Q(status=OutboxStatus.DEAD)),
        oldest_pending=Min("created_at", filter=Q(status__in=live)),
    ).order_by():
        outbox[(row.pop("clinic_ref"), row.pop("topic"))] = row
    subscriptions: dict[int, dict[str, int]] = {}
    for clinic_id, status, n in (Subscription.objects.filter(clinic_id__in=ids).values("clinic_id", "status")
                                 .annotate(n=Count("id")).order_by().values_list("clinic_id", "status", "n")):
        subscriptions.setdefault(clinic_id, {})[status] = n
    # Only a clinic whose provider failed at all has a run of failures to measure (a quiet clinic costs nothing).
    failing = set(OutboxAttempt.objects.filter(message__clinic_ref__in=refs, message__topic__in=NOTICE_TOPICS,
                                               outcome=DeliveryOutcome.FAILED)
                  .values_list("message__clinic_ref", flat=True).distinct().order_by())
    freshness = decision_freshness_by_clinic(clinic_ids=ids, now=now)  # every clinic of the scrape, one query
    newest = dict(BookingReliabilityDecision.objects.filter(clinic_id__in=ids).values("clinic_id")
                  .annotate(at=Max("received_at")).order_by().values_list("clinic_id", "at"))
    since = now - timedelta(days=int(getattr(settings, "WAITLIST_METRICS_WINDOW_DAYS", 30)))
    filling = set(Vacancy.objects.filter(clinic_id__in=ids, created_at__gte=since).values_list("clinic_id", flat=True)
                  .distinct().order_by())
    job_counts: dict[int, dict[str, int]] = {}
    for clinic_id, state, n in (ReevaluationJob.objects.filter(clinic_id__in=ids).values("clinic_id", "state")
                                .annotate(n=Count("id")).order_by().values_list("clinic_id", "state", "n")):
        job_counts.setdefault(clinic_id, {})[state] = n
    backlog = [JobState.PENDING, JobState.RETRY_WAIT]  # as ``reevaluation.selectors.snapshot``
    running = Q(state=JobState.RUNNING, lease_expires_at__gt=now)
    jobs = _by(ReevaluationJob.objects.filter(clinic_id__in=ids).values("clinic_id").annotate(
        active_leases=Count("id", filter=running),
        expired_leases=Count("id", filter=Q(state=JobState.RUNNING, lease_expires_at__lte=now)),
        oldest_backlog=Min("created_at", filter=Q(state__in=backlog)),
        overdue=Count("id", filter=Q(state__in=backlog, due_at__lt=now)),
        stalest=Min("lease_renewed_at", filter=running),
        stalest_claimed=Min("first_claimed_at", filter=running),
    ).order_by())
    reeval = _by(ClinicReevaluationSettings.objects.filter(clinic_id__in=ids).values(
        "clinic_id", "lease_renewal_failures", "consecutive_assessment_failures", "drain_state"))
    quarantine = dict(QuarantineCase.objects.filter(clinic_id__in=ids).values("clinic_id").annotate(n=Count("id"))
                      .order_by().values_list("clinic_id", "n"))
    no_jobs = {"active_leases": 0, "expired_leases": 0, "oldest_backlog": None, "overdue": 0, "stalest": None,
               "stalest_claimed": None}
    no_settings = {"lease_renewal_failures": 0, "consecutive_assessment_failures": 0, "drain_state": DrainState.ACTIVE}
    upkeep = upkeep_counts(ids)
    for clinic in clinics:
        labels = (clinic.tenant_group.ref, clinic.ref)
        for outcome in UpkeepOutcome.values:
            add("waitlist_upkeep_questions", (*labels, outcome), upkeep.get(clinic.pk, {}).get(outcome, 0))
        v = vacancies.get(clinic.pk, {"open": 0, "review": 0, "oldest_review": None})
        add("waitlist_vacancies", (*labels, "OPEN"), v["open"])
        add("waitlist_vacancies", (*labels, "REVIEW"), v["review"])
        add("waitlist_review_oldest_age_seconds", labels, _age(now, v["oldest_review"]) or 0)
        add("waitlist_offers_active", labels, offers.get(clinic.pk, 0))

        nothing = {"pending": 0, "dead": 0, "oldest_pending": None}
        o = outbox.get((clinic.ref, OFFER_TOPIC), nothing)
        oldest = o["oldest_pending"]
        add("waitlist_outbox_backlog", labels, o["pending"])
        add("waitlist_outbox_dead", labels, o["dead"])
        add("waitlist_outbox_oldest_pending_age_seconds", labels,
            max(0, int((now - oldest).total_seconds())) if oldest else 0)

        failures = notice_provider_failures(clinic=clinic)["failures"] if clinic.ref in failing else 0
        add("waitlist_notice_provider_failures", labels, failures)
        by_status = subscriptions.get(clinic.pk, {})
        for status in SubscriptionStatus.values:
            add("fhir_subscriptions", (*labels, status), by_status.get(status, 0))
        f = outbox.get((clinic.ref, NOTIFICATION_TOPIC), nothing)
        add("fhir_notifications_undelivered", labels, f["pending"])
        add("fhir_notifications_dead", labels, f["dead"])
        add("fhir_notification_oldest_undelivered_age_seconds", labels, _age(now, f["oldest_pending"]) or 0)

        counts = freshness.get(clinic.pk, {"FRESH": 0, "STALE": 0, "UNAVAILABLE": 0, "MISSING": 0})
        for state, count in counts.items():
            add("waitlist_decisions", (*labels, state), count)
        if clinic.pk in newest:  # absent (not 0) when the feed never delivered: "absent" alerts can tell
            add("waitlist_decision_feed_age_seconds", labels, _age(now, newest[clinic.pk]))

        fill = fill_metrics(clinic=clinic, now=now) if clinic.pk in filling else _NO_FILL
        for outcome, count in fill["vacancies"].items():
            add("waitlist_window_vacancies", (*labels, outcome), count)
        if fill["fill_rate"] is not None:
            add("waitlist_fill_rate", labels, fill["fill_rate"])
        for quantile, key in (("0.5", "p50"), ("0.9", "p90")):
            if fill["time_to_fill_seconds"][key] is not None:
                add("waitlist_time_to_fill_seconds", (*labels, quantile), fill["time_to_fill_seconds"][key])

        by_state = job_counts.get(clinic.pk, {})
        for state in JobState.values:
            add("reevaluation_jobs", (*labels, state), by_state.get(state, 0))
        j, r = jobs.get(clinic.pk, no_jobs), reeval.get(clinic.pk, no_settings)
        backlog_at = j["oldest_backlog"]
        add("reevaluation_backlog_oldest_age_seconds", labels,
            int((now - backlog_at).total_seconds()) if backlog_at is not None else 0)
        add("reevaluation_jobs_overdue", labels, j["overdue"])
        add("reevaluation_leases_active", labels, j["active_leases"])
        add("reevaluation_leases_expired", labels, j["expired_leases"])
        add("reevaluation_lease_renewal_failures", labels, r["lease_renewal_failures"])
        add("reevaluation_consecutive_assessment_failures", labels, r["consecutive_assessment_failures"])
        add("reevaluation_quarantine_cases", labels, quarantine.get(clinic.pk, 0))
        for state in DrainState.values:
            add("reevaluation_drain_state", (*labels, state), 1 if r["drain_state"] == state else 0)
        stalest = j["stalest"] or j["stalest_claimed"]
        add("reevaluation_lease_oldest_renewal_age_seconds", labels, _age(now, stalest) or 0)


def domain_samples(scope: Scope, now: datetime | None = None) -> dict[str, list[tuple[tuple, float]]]:
    """name → [(label values, value)] for every clinic in ``scope`` plus the global gauges."""
    now = now or timezone.now()
    samples: dict[str, list[tuple[tuple, float]]] = {name: [] for name in GAUGES}

    def add(name: str, labels: tuple, value) -> None:
        samples[name].append((labels, float(value)))

    _clinics_samples(list(scope.clinics()), now, add)
    for job, at in JobRun.objects.order_by("name").values_list("name", "last_run_at"):
        add("waitlist_job_last_run_timestamp_seconds", (job,), at.timestamp())
    if scope.tenant_group == "*":
        add("reevaluation_quarantine_unattributed", (), QuarantineCase.objects.filter(clinic__isnull=True).count())
        held, waiting = DISPATCH_SLOTS.usage()
        add("waitlist_dispatch_slots", (), max(DISPATCH_SLOTS.size(), 0))
        add("waitlist_dispatch_slots_held", (), held)
        add("waitlist_dispatch_slot_waiters", (), waiting)
    return samples


def cached_domain_samples(scope: Scope) -> tuple[dict, bool | None]:
    """(samples, whether the cache answered: None when caching is off). With Redis down the samples are
    computed every scrape: monitoring must keep seeing during the outage it reports."""
    return cached_answer(f"metrics:domain:{scope.tenant_group}", int(getattr(settings, "METRICS_CACHE_SECONDS", 10)),
                         lambda: domain_samples(scope))


def _cache_answers() -> bool:
    try:
        cache.get("metrics:probe")
    except REDIS_ERRORS as exc:
        cache_dependency.failed(exc)
        return False
    return True


def service_samples(cache_up: bool | None) -> dict[str, list[tuple[tuple, float]]]:
    """The background components' gauges (observability.components) and the two Redis dependencies."""
    from . import components, health

    samples: dict[str, list[tuple[tuple, float]]] = {name: [] for name in SERVICE_GAUGES}

    def add(name: str, value) -> None:
        if value is not None:
            samples[name].append(((), float(value)))

    add("service_broker_up", 1 if health.check_broker() == "ok" else 0)
    add("service_cache_up", 1 if (cache_up if cache_up is not None else _cache_answers()) else 0)
    beat, workers = components.beat(), components.workers()
    add("service_beat_heartbeat_age_seconds", beat.age_seconds)
    add("service_beat_last_send_age_seconds", beat.send_age_seconds)
    add("service_beat_send_failing", 1 if beat.state == "cannot_send" else 0)
    add("service_workers_alive", workers.alive or 0)
    add("service_worker_heartbeat_age_seconds", workers.age_seconds)
    return samples


class _DomainCollector:
    def __init__(self, samples: dict, catalogue: dict = GAUGES):
        self.samples, self.catalogue = samples, catalogue

    def collect(self):
        for name, (doc, labels) in self.catalogue.items():
            family = GaugeMetricFamily(name, doc, labels=list(labels))
            for values, value in self.samples.get(name, []):
                family.add_metric(list(values), value)
            yield family


def exposition(scope: Scope) -> bytes:
    """The text format: this process's (or, in multiprocess mode, all processes') request metrics and
    the domain gauges of ``scope``."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        requests = CollectorRegistry()
        MultiProcessCollector(requests)
    else:
        requests = _process_registry
    domain = CollectorRegistry(auto_describe=False)
    samples, cache_up = cached_domain_samples(scope)
    domain.register(_DomainCollector(samples))
    domain.register(_DomainCollector(service_samples(cache_up), SERVICE_GAUGES))
    return generate_latest(requests) + generate_latest(domain)
