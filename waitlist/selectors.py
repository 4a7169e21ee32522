"""Waitlist reads (no locks). Every lookup is scoped to the clinic: foreign refs are 404."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Min, OuterRef, Q, Subquery
from django.utils import timezone

from common.models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from common.timefmt import iso_in_zone
from scheduling.models import Clinic
from scheduling.scoping import scoped_get
from scheduling.services.features import feature_enabled

from .models import (
    ACTIVE_OFFER_STATUSES,
    BookingReliabilityDecision,
    JobRun,
    Offer,
    OfferEvent,
    Vacancy,
    VacancyStatus,
    WaitlistEntry,
    WaitlistPolicy,
)
from .notifications import OFFER_TOPIC


def entry_detail(*, clinic: Clinic, ref: str) -> WaitlistEntry:
    return scoped_get(
        WaitlistEntry.objects.select_related("patient", "treatment", "practitioner"), clinic, ref
    )


def vacancy_detail(*, clinic: Clinic, ref: str) -> tuple[Vacancy, Offer | None]:
    vacancy = scoped_get(Vacancy.objects.select_related("practitioner", "treatment", "resource"), clinic, ref)
    active = vacancy.offers.filter(status__in=ACTIVE_OFFER_STATUSES).only("ref").first()
    return vacancy, active


def offer_detail(*, clinic: Clinic, ref: str) -> Offer:
    return scoped_get(Offer.objects.select_related("vacancy", "entry", "hold"), clinic, ref)


# --- operations: readiness, fill metrics and the action queue (refs and codes only) ---

OPS_QUEUE_KINDS = ("VACANCY_REVIEW", "BOOKING_STUCK", "DELIVERY_DEAD", "OFFER_WITHOUT_HOLD")


def _metrics_window_days() -> int:
    return int(getattr(settings, "WAITLIST_METRICS_WINDOW_DAYS", 30))


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


FILL_METRICS_SQL = """
WITH v AS (
    SELECT id, status, created_at, exhausted_at FROM {vacancy}
    WHERE clinic_id = %(clinic)s AND created_at >= %(since)s
), o AS (
    SELECT o.id, o.vacancy_id, o.status FROM {offer} o JOIN v ON v.id = o.vacancy_id
), filled AS (
    -- time to fill: vacancy opened → its booking event
    SELECT EXTRACT(EPOCH FROM MIN(e.created_at) - v.created_at) AS seconds
    FROM v JOIN {offer} o ON o.vacancy_id = v.id
    JOIN {event} e ON e.offer_id = o.id AND e.reason_code = 'BOOKED'
    WHERE v.status = 'FILLED'
    GROUP BY v.id, v.created_at
)
SELECT
    (SELECT COUNT(*) FROM v),
    (SELECT COUNT(*) FROM v WHERE status = 'FILLED'),
    (SELECT COUNT(*) FROM v WHERE status = 'CLOSED'),
    (SELECT COUNT(*) FROM v WHERE status IN ('OPEN', 'REVIEW')),
    (SELECT COUNT(*) FROM v WHERE exhausted_at IS NOT NULL AND status <> 'FILLED'),
    (SELECT COUNT(*) FROM o),
    (SELECT COUNT(DISTINCT vacancy_id) FROM o),
    (SELECT COUNT(*) FROM o WHERE status = 'OFFERED'),
    (SELECT COUNT(*) FROM o WHERE status = 'ACCEPTED'),
    (SELECT COUNT(*) FROM o WHERE status = 'DECLINED'),
    (SELECT COUNT(*) FROM o WHERE status = 'EXPIRED'),
    (SELECT COUNT(*) FROM o WHERE status = 'WITHDRAWN'),
    (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FROM filled),
    (SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY seconds) FROM filled)
"""


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
    window_days = window_days or _metrics_window_days()
    since = now - timedelta(days=window_days)
    sql = FILL_METRICS_SQL.format(
        vacancy=Vacancy._meta.db_table, offer=Offer._meta.db_table, event=OfferEvent._meta.db_table
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"clinic": clinic.pk, "since": since})
        (vacancies, filled, closed, open_, exhausted, offers, offered_vacancies, offered, accepted, declined,
         expired, withdrawn, p50, p90) = cursor.fetchone()
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


DECISION_FRESHNESS_SQL = """
SELECT freshness, COUNT(*) FROM (
    SELECT p.patient_id, COALESCE((
        SELECT CASE
            WHEN d.status = 'FRESH' AND d.expires_at > %(now)s THEN 'FRESH'
            WHEN d.status = 'UNAVAILABLE' THEN 'UNAVAILABLE'
            ELSE 'STALE' END
        FROM {decision} d
        WHERE d.clinic_id = %(clinic)s AND d.patient_id = p.patient_id
        ORDER BY d.received_at DESC, d.id DESC LIMIT 1
    ), 'MISSING') AS freshness
    FROM (SELECT DISTINCT patient_id FROM {entry} WHERE clinic_id = %(clinic)s AND status = 'WAITING') p
) x GROUP BY freshness
"""


def decision_freshness(*, clinic: Clinic, now: datetime) -> dict:
    """Newest booking-reliability decision of each WAITING patient: FRESH/STALE/UNAVAILABLE/MISSING counts."""
    counts = {"FRESH": 0, "STALE": 0, "UNAVAILABLE": 0, "MISSING": 0}
    sql = DECISION_FRESHNESS_SQL.format(
        decision=BookingReliabilityDecision._meta.db_table, entry=WaitlistEntry._meta.db_table
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"clinic": clinic.pk, "now": now})
        for freshness, count in cursor.fetchall():
            counts[freshness] = count
    return counts


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


def ops_snapshot(*, clinic: Clinic, now: datetime | None = None, queue_limit: int = 50) -> dict:
    """Readiness, fill metrics and the first page of the action queue for one clinic (STAFF read)."""
    now = now or timezone.now()
    policy = WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version").values("version", "ref").first()
    # Jobs run across all clinics: only their timestamps are shown here (their counts are global).
    jobs = {
        name: {"last_run_at": iso_in_zone(at, clinic.timezone)}
        for name, at in JobRun.objects.values_list("name", "last_run_at")
    }
    return {
        "clinic": clinic.ref,
        "generated_at": iso_in_zone(now, clinic.timezone),
        "readiness": {
            "feature_enabled": feature_enabled("waitlist", clinic),
            "policy_version": policy["version"] if policy else None,
            "decision_freshness": decision_freshness(clinic=clinic, now=now),
            "outbox": outbox_health(clinic=clinic, now=now),
            "jobs": jobs,
        },
        "metrics": fill_metrics(clinic=clinic, now=now),
        "action_queue": ops_action_queue(clinic=clinic, now=now, limit=queue_limit),
    }


def _cursor_encode(at: datetime, kind: str, ref: str) -> str:
    return f"{at.isoformat()}|{kind}|{ref}"


def cursor_decode(after) -> tuple[datetime, str, str] | None:
    """An ``after`` cursor from a previous page; None (the first page) for anything malformed."""
    if not isinstance(after, str) or len(after) > 200:
        return None
    parts = after.split("|")
    if len(parts) != 3 or parts[1] not in OPS_QUEUE_KINDS:
        return None
    try:
        at = datetime.fromisoformat(parts[0])
    except ValueError:
        return None
    if at.utcoffset() is None:
        return None
    return at, parts[1], parts[2]


def _after(rows, position):
    return [r for r in rows if position is None or (r["_at"], r["kind"], r["ref"]) > position]


def ops_action_queue(
    *, clinic: Clinic, limit: int = 50, after: str | None = None, now: datetime | None = None
) -> dict:
    """What needs a person, oldest first, as one keyset-paged list over four sources (each source
    read with the same ``(at, kind, ref) > after`` bound and ``limit``, then merged; no N+1):

    - ``VACANCY_REVIEW``: a STALE/UNAVAILABLE decision stopped automatic promotion (STAFF_REVIEW);
    - ``BOOKING_STUCK``: an ACCEPTED hold not booked ``WAITLIST_BOOKING_RETRY_MINUTES`` after the claim;
    - ``DELIVERY_DEAD``: an offer notification that reached the attempt bound;
    - ``OFFER_WITHOUT_HOLD``: an active offer whose hold no longer reserves the slot (reconcile finding).

    Each row: ``kind``, ``ref`` (the row to act on), ``at``, ``reason_code``, related refs,
    ``policy_version`` and ``decision_ref``. Refs and codes only. ``next`` is the cursor of the next page.
    """
    from .services.loop import offers_without_active_hold, stuck_accepted_offers

    now = now or timezone.now()
    limit = max(1, min(int(limit), 200))
    position = cursor_decode(after)
    since = position[0] if position else None
    rows: list[dict] = []

    def bounded(qs, field):
        return qs.filter(**{f"{field}__gte": since}) if since else qs

    latest_decision = BookingReliabilityDecision.objects.filter(
        clinic=clinic, patient=OuterRef("review_entry__patient")
    ).order_by("-received_at", "-id")
    current_policy = WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version").values("version")[:1]
    reviews = bounded(Vacancy.objects.filter(clinic=clinic, status=VacancyStatus.REVIEW), "updated_at").annotate(
        decision_ref=Subquery(latest_decision.values("decision_ref")[:1]),
        decision_status=Subquery(latest_decision.values("status")[:1]),
        policy_version=Subquery(current_policy),
    ).values("ref", "updated_at", "review_entry__ref", "decision_ref", "decision_status", "policy_version")
    for v in reviews.order_by("updated_at", "ref")[:limit]:
        rows.append({"kind": "VACANCY_REVIEW", "ref": v["ref"], "_at": v["updated_at"],
                     "reason_code": f"DECISION_{v['decision_status'] or 'UNAVAILABLE'}", "vacancy": v["ref"],
                     "entry": v["review_entry__ref"], "policy_version": v["policy_version"],
                     "decision_ref": v["decision_ref"]})

    last_code = OfferEvent.objects.filter(
        offer=OuterRef("pk"), reason_code__in=["BOOKING_STUCK", "BOOKING_RETRY_FAILED"]
    ).order_by("-id").values("detail__code")[:1]
    stuck = bounded(stuck_accepted_offers(now).filter(clinic=clinic), "updated_at").annotate(
        last_code=Subquery(last_code)
    ).values("ref", "updated_at", "hold__ref", "vacancy__ref", "entry__ref", "policy_version", "decision_ref",
             "last_code")
    for o in stuck.order_by("updated_at", "ref")[:limit]:
        rows.append({"kind": "BOOKING_STUCK", "ref": o["hold__ref"], "_at": o["updated_at"],
                     "reason_code": o["last_code"] or "NOT_BOOKED", "offer": o["ref"], "hold": o["hold__ref"],
                     "vacancy": o["vacancy__ref"], "entry": o["entry__ref"], "policy_version": o["policy_version"],
                     "decision_ref": o["decision_ref"]})

    offer_facts = Offer.objects.filter(clinic=clinic, ref=OuterRef("aggregate_ref"))
    dead = bounded(
        OutboxMessage.objects.filter(clinic_ref=clinic.ref, topic=OFFER_TOPIC, status=OutboxStatus.DEAD), "created_at"
    ).annotate(
        offer_status=Subquery(offer_facts.values("status")[:1]),
        policy_version=Subquery(offer_facts.values("policy_version")[:1]),
        decision_ref=Subquery(offer_facts.values("decision_ref")[:1]),
    ).values("ref", "created_at", "aggregate_ref", "last_error_code", "attempts", "offer_status", "policy_version",
             "decision_ref")
    for m in dead.order_by("created_at", "ref")[:limit]:
        rows.append({"kind": "DELIVERY_DEAD", "ref": m["ref"], "_at": m["created_at"],
                     "reason_code": m["last_error_code"] or "DEAD", "offer": m["aggregate_ref"],
                     "offer_status": m["offer_status"], "attempts": m["attempts"],
                     "policy_version": m["policy_version"], "decision_ref": m["decision_ref"]})

    broken = bounded(offers_without_active_hold().filter(clinic=clinic), "created_at").values(
        "ref", "created_at", "status", "hold__ref", "hold__status", "vacancy__ref", "policy_version", "decision_ref")
    for o in broken.order_by("created_at", "ref")[:limit]:
        rows.append({"kind": "OFFER_WITHOUT_HOLD", "ref": o["ref"], "_at": o["created_at"],
                     "reason_code": f"HOLD_{o['hold__status']}", "offer": o["ref"], "offer_status": o["status"],
                     "hold": o["hold__ref"], "vacancy": o["vacancy__ref"], "policy_version": o["policy_version"],
                     "decision_ref": o["decision_ref"]})

    rows.sort(key=lambda r: (r["_at"], r["kind"], r["ref"]))
    page = _after(rows, position)[:limit]
    more = len(_after(rows, position)) > limit
    items = []
    for row in page:
        at = row.pop("_at")
        items.append({"at": iso_in_zone(at, clinic.timezone), **row})
    next_cursor = None
    if page and (more or len(page) == limit):
        last = page[-1]
        next_cursor = _cursor_encode(datetime.fromisoformat(items[-1]["at"]), last["kind"], last["ref"])
    return {"items": items, "next": next_cursor}
