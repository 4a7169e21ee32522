"""Waitlist metrics for the console's Waitlist page and ``/metrics``: fill metrics, decision freshness,
outbox health and readiness warnings (counts and codes only)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Exists, Max, Min, Q, Subquery
from django.utils import timezone

from common.models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from common.notify import provider_for
from common.timefmt import iso_in_zone
from scheduling.models import Clinic
from waitlist import queries
from waitlist.models import (
    OFFER_TOPIC,
    BookingReliabilityDecision,
    DecisionGate,
    DecisionStatus,
    EntryStatus,
    WaitlistEntry,
)
from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC
from waitlist.reliability.feed import Decision, get_decision_provider

#: The patient notices of the waitlist (an offer, a booking's confirmation): their provider is the clinic's.
NOTICE_TOPICS = (OFFER_TOPIC, BOOKING_CONFIRMED_TOPIC)


def metrics_window_days() -> int:
    """How many days back the fill metrics, fairness tables and trends look (``WAITLIST_METRICS_WINDOW_DAYS``)."""
    return int(getattr(settings, "WAITLIST_METRICS_WINDOW_DAYS", 30))


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def fill_metrics(*, clinic: Clinic, now: datetime | None = None, window_days: int | None = None) -> dict:
    """Fill metrics over vacancies opened in the last ``window_days`` (one SQL round trip, plus one
    for deliveries). Definitions (docs/waitlist.md "Fill metrics"):

    - ``fill_rate`` = FILLED / (FILLED + CLOSED) — of vacancies that are decided;
    - ``time_to_fill_seconds`` p50/p90 = vacancy opened → BOOKED event, over FILLED vacancies;
    - ``offers_per_vacancy`` = offers / vacancies that got at least one offer;
    - ``acceptance_per_offer`` = ACCEPTED / offers that were answered or closed (not OFFERED now);
    - ``expired``/``declined``/``withdrawn`` offer counts;
    - ``exhausted`` = vacancies whose dispatch once found no candidate left and that were never filled;
    - ``delivery`` = offer notifications DEAD, and FAILED attempts, for messages created in the window.
    """
    now = now or timezone.now()
    window_days = window_days or metrics_window_days()
    since = now - timedelta(days=window_days)
    (vacancies, filled, closed, open_, exhausted, offers, offered_vacancies, offered, accepted, declined,
     expired, withdrawn, p50, p90) = queries.fill_metrics_counts(clinic_id=clinic.pk, since=since)
    delivery = OutboxMessage.objects.filter(
        clinic_ref=clinic.ref, topic=OFFER_TOPIC, created_at__gte=since
    ).aggregate(
        dead=Count("id", filter=Q(status=OutboxStatus.DEAD), distinct=True),
        failed_attempts=Count("attempt_rows", filter=Q(attempt_rows__outcome=DeliveryOutcome.FAILED)),
    )
    return {
        "window_days": window_days,
        "vacancies": {"total": vacancies, "filled": filled, "closed": closed, "open": open_, "exhausted": exhausted},
        "fill_rate": _ratio(filled, filled + closed),
        "time_to_fill_seconds": {
            "p50": round(p50, 1) if p50 is not None else None,
            "p90": round(p90, 1) if p90 is not None else None,
        },
        "offers": {"total": offers, "open": offered, "accepted": accepted, "declined": declined,
                   "expired": expired, "withdrawn": withdrawn},
        "offers_per_vacancy": _ratio(offers, offered_vacancies),
        "acceptance_per_offer": _ratio(accepted, offers - offered),
        "expired_vs_declined": {"expired": expired, "declined": declined},
        "delivery_failures": {"dead": delivery["dead"], "failed_attempts": delivery["failed_attempts"]},
    }


def _freshness_counts() -> dict[str, int]:
    return {"FRESH": 0, "STALE": 0, "UNAVAILABLE": 0, "MISSING": 0}


def decision_freshness_by_clinic(*, clinic_ids: list[int], now: datetime) -> dict[int, dict[str, int]]:
    """Newest booking-reliability decision of each WAITING patient: FRESH/STALE/UNAVAILABLE/MISSING counts per
    clinic of ``clinic_ids``, read through the ``DecisionProvider`` like every decision read, in one query (its
    ``newest_per_patient_sql``). A patient's decisions are their clinic's (an entry is the patient's clinic's).
    The one rule that turns a decision into its effective status (``Decision.effective_status``) is applied to
    each group in Python; a clinic with no WAITING patient has no entry."""
    groups = queries.decision_freshness_groups(
        clinic_ids=list(clinic_ids), now=now, newest_sql=get_decision_provider().newest_per_patient_sql("waiting"))
    out: dict[int, dict[str, int]] = {}
    for clinic_id, status, expired, n in groups:
        counts = out.setdefault(clinic_id, _freshness_counts())
        if status is None:
            counts["MISSING"] += n
            continue
        # A representative expiry: ``now`` when the group's decisions are past theirs, else none.
        effective = Decision("", status, 0, now if expired else None).effective_status(now)
        counts[effective if effective in counts else DecisionStatus.STALE] += n
    return out


def decision_freshness(*, clinic: Clinic, now: datetime) -> dict:
    """``decision_freshness_by_clinic`` of one clinic (all zero without WAITING patients)."""
    return decision_freshness_by_clinic(clinic_ids=[clinic.pk], now=now).get(clinic.pk, _freshness_counts())


def outbox_health(*, clinic: Clinic, now: datetime) -> dict:
    """The clinic's offer notifications: pending (incl. leased), leased, dead, oldest pending age."""
    agg = OutboxMessage.objects.filter(clinic_ref=clinic.ref, topic=OFFER_TOPIC).aggregate(
        pending=Count("id", filter=Q(status__in=[OutboxStatus.PENDING, OutboxStatus.LEASED])),
        leased=Count("id", filter=Q(status=OutboxStatus.LEASED)),
        dead=Count("id", filter=Q(status=OutboxStatus.DEAD)),
        oldest_pending=Min("created_at", filter=Q(status__in=[OutboxStatus.PENDING, OutboxStatus.LEASED])),
    )
    last_attempt = (
        OutboxAttempt.objects.filter(message__clinic_ref=clinic.ref, message__topic=OFFER_TOPIC)
        .aggregate(at=Max("finished_at"))["at"]
    )
    oldest = agg.pop("oldest_pending")
    return {
        **agg,
        "oldest_pending_age_seconds": max(0, int((now - oldest).total_seconds())) if oldest else None,
        "last_attempt_at": iso_in_zone(last_attempt, clinic.timezone) if last_attempt else None,
    }


def readiness_warnings(*, clinic: Clinic, now: datetime, decision_gate: str | None) -> list[str]:
    """Codes for conditions that stop the loop quietly (one query). ``DECISION_FEED_SILENT``: the decision
    gate is REQUIRED, patients are waiting, and none of them got a decision in the last 24 h (so every
    vacancy would stop in staff review or pass everyone over)."""
    if decision_gate == DecisionGate.NOT_USED:
        return []
    waiting = WaitlistEntry.objects.filter(clinic=clinic, status=EntryStatus.WAITING)
    recent = BookingReliabilityDecision.objects.filter(
        clinic=clinic, received_at__gt=now - timedelta(hours=24), patient_id__in=waiting.values("patient_id")
    )
    row = (
        Clinic.objects.filter(pk=clinic.pk)
        .annotate(has_waiting=Exists(waiting), fed=Exists(recent))
        .values("has_waiting", "fed")
        .first()
    )
    return ["DECISION_FEED_SILENT"] if row and row["has_waiting"] and not row["fed"] else []



def provider_failing_after() -> int:
    """Failed attempts in a row (no notice sent since) after which the clinic's notice provider is failing."""
    return int(getattr(settings, "WAITLIST_PROVIDER_FAILING_AFTER", 3))


def notice_provider_failures(*, clinic: Clinic) -> dict:
    """The clinic's notice provider's current run of failed attempts (``failures`` since the last sent notice,
    ``since`` the first of them, ``code`` the newest error) and when it last sent: one query."""
    attempts = OutboxAttempt.objects.filter(message__clinic_ref=clinic.ref, message__topic__in=NOTICE_TOPICS)
    sent = attempts.filter(outcome=DeliveryOutcome.SENT)
    last_sent = sent.order_by("-finished_at").values("finished_at")[:1]
    failed = attempts.filter(outcome=DeliveryOutcome.FAILED).filter(
        Q(finished_at__gt=Subquery(last_sent)) | ~Exists(sent))
    newest_code = failed.order_by("-finished_at", "-id").values("error_code")[:1]
    streak = failed.aggregate(n=Count("id"), since=Min("finished_at"), code=Max(Subquery(newest_code)),
                              last_sent=Max(Subquery(last_sent)))
    return {"provider": provider_for(clinic.settings).name, "failures": streak["n"], "since": streak["since"],
            "code": streak["code"], "last_sent": streak["last_sent"]}
