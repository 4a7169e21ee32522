"""Waitlist reads (no locks). Every lookup is scoped to the clinic: foreign refs are 404."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import cast

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, F, Max, Min, OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Collate
from django.utils import timezone

from common.models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from common.pagination import KeysetPage, day_bounds, keyset_page
from common.timefmt import iso_in_zone
from scheduling.models import CapacityAllocation, Clinic, ConsentState, ContactConsent, HoldStatus, Patient
from scheduling.scoping import scoped_get
from scheduling.services.consent import provider_channels
from scheduling.services.features import feature_enabled

from . import eligibility
from .decisions import Decision, get_decision_provider
from .fairness import fairness_metrics_cached, shadow_summary
from .models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    NON_BARRING_WITHDRAW_REASONS,
    OFFER_TOPIC,
    BookingReliabilityDecision,
    DecisionGate,
    DecisionStatus,
    DispatchNote,
    EntryStatus,
    JobRun,
    Offer,
    OfferEvent,
    OfferStatus,
    Vacancy,
    VacancyStatus,
    WaitlistEntry,
    WaitlistPolicy,
)


def entry_detail(*, clinic: Clinic, ref: str) -> WaitlistEntry:
    return scoped_get(
        WaitlistEntry.objects.select_related("patient", "treatment", "practitioner"), clinic, ref
    )


def standing_current(*, entry: WaitlistEntry):
    """The entry's newest standing-acceptance row (GRANTED or REVOKED), or None: never recorded."""
    return entry.standing.order_by("-id").first()


def _list_filters(queryset, *, clinic: Clinic, status=None, practitioner=None, treatment=None, day=None,
                  prefix: str = "", day_field: str = "starts_at"):
    """The console/API list filters, shared by vacancies, offers (through ``vacancy__``) and entries."""
    if status:
        queryset = queryset.filter(status=status)
    if practitioner:
        queryset = queryset.filter(**{f"{prefix}practitioner__ref": practitioner})
    if treatment:
        queryset = queryset.filter(**{f"{prefix}treatment__ref": treatment})
    if day:
        start, end = day_bounds(day, clinic.timezone)
        if day_field == "window":  # an entry's window covers part of the day
            queryset = queryset.filter(earliest__lt=end, latest__gt=start)
        else:
            queryset = queryset.filter(**{f"{prefix}{day_field}__gte": start, f"{prefix}{day_field}__lt": end})
    return queryset


def opted_out(patient_field: str = "patient_id"):
    """True when the patient withdrew contact consent (the opt-out link or staff): consent rows exist and no
    channel's newest row is GRANTED. A patient who never consented is not "opted out"."""
    rows = ContactConsent.objects.filter(patient_id=OuterRef(patient_field))
    newer = ContactConsent.objects.filter(patient_id=OuterRef("patient_id"), channel=OuterRef("channel"),
                                          id__gt=OuterRef("id"))
    granted = rows.filter(state=ConsentState.GRANTED).exclude(Exists(newer))
    return ExpressionWrapper(Q(Exists(rows)) & ~Q(Exists(granted)), output_field=BooleanField())


def entry_page(
    *, clinic: Clinic, limit: int, after: str = "", status: str | None = None, day: date | None = None,
    practitioner: str | None = None, treatment: str | None = None,
) -> KeysetPage:
    """The clinic's waitlist entries, longest waiting first; ``day`` keeps entries whose window
    covers part of that local day. One query (keyset on ``waiting_since``, ``id``)."""
    queryset = WaitlistEntry.objects.filter(clinic=clinic).select_related("patient", "treatment", "practitioner")
    queryset = _list_filters(queryset, clinic=clinic, status=status, practitioner=practitioner,
                             treatment=treatment, day=day, day_field="window").annotate(opted_out=opted_out())
    return keyset_page(queryset, field="waiting_since", limit=limit, after=after)


def vacancy_page(
    *, clinic: Clinic, limit: int, after: str = "", status: str | None = None, day: date | None = None,
    practitioner: str | None = None, treatment: str | None = None,
) -> KeysetPage:
    """The clinic's vacancies, newest first, each with its active offer's ref and expiry. One query."""
    active = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES).order_by("-id")
    queryset = (
        Vacancy.objects.filter(clinic=clinic)
        .select_related("practitioner", "treatment")
        .annotate(
            active_offer_ref=Subquery(active.values("ref")[:1]),
            active_offer_expires_at=Subquery(active.values("expires_at")[:1]),
            active_offer_status=Subquery(active.values("status")[:1]),
            offer_count=Subquery(
                Offer.objects.filter(vacancy=OuterRef("pk")).order_by().values("vacancy")
                .annotate(n=Count("id")).values("n")[:1]
            ),
        )
    )
    queryset = _list_filters(queryset, clinic=clinic, status=status, practitioner=practitioner,
                             treatment=treatment, day=day)
    return keyset_page(queryset, field="created_at", limit=limit, after=after, descending=True)


#: The offer list's pseudo-state: OFFERED or ACCEPTED (live, with a countdown to expiry).
ACTIVE_OFFERS = "ACTIVE"


def offer_page(
    *, clinic: Clinic, limit: int, after: str = "", status: str | None = None, day: date | None = None,
    practitioner: str | None = None, treatment: str | None = None,
) -> KeysetPage:
    """The clinic's offers, newest first, with their vacancy's slot, practitioner and treatment. One query."""
    queryset = Offer.objects.filter(clinic=clinic).select_related(
        "vacancy__practitioner", "vacancy__treatment", "entry", "hold"
    )
    if status == ACTIVE_OFFERS:
        queryset, status = queryset.filter(status__in=ACTIVE_OFFER_STATUSES), None
    queryset = _list_filters(queryset, clinic=clinic, status=status, practitioner=practitioner,
                             treatment=treatment, day=day, prefix="vacancy__")
    return keyset_page(queryset, field="created_at", limit=limit, after=after, descending=True)


def vacancies_by_ref(*, clinic: Clinic, refs: list[str]) -> dict[str, Vacancy]:
    """The clinic's vacancies among ``refs`` (one query; foreign and unknown refs are simply absent)."""
    rows = Vacancy.objects.filter(clinic=clinic, ref__in=refs).select_related(
        "practitioner", "treatment", "review_entry"
    )
    return {v.ref: v for v in rows}


def vacancy_detail(*, clinic: Clinic, ref: str) -> tuple[Vacancy, Offer | None]:
    vacancy = scoped_get(Vacancy.objects.select_related("practitioner", "treatment", "resource"), clinic, ref)
    active = vacancy.offers.filter(status__in=ACTIVE_OFFER_STATUSES).only("ref").first()
    return vacancy, active


def offer_detail(*, clinic: Clinic, ref: str) -> Offer:
    return scoped_get(Offer.objects.select_related("vacancy", "entry", "hold__appointment"), clinic, ref)


def offer_appointment_ref(*, clinic: Clinic, offer_ref: str) -> str | None:
    """The appointment the offer's hold was booked into, if it has been (None before booking)."""
    return (
        Offer.objects.filter(clinic=clinic, ref=offer_ref, hold__appointment__isnull=False)
        .values_list("hold__appointment__ref", flat=True)
        .first()
    )


# --- operations: readiness, fill metrics and the action queue (refs and codes only) ---

OPS_QUEUE_KINDS = ("VACANCY_REVIEW", "BOOKING_STUCK", "DELIVERY_DEAD", "OFFER_WITHOUT_HOLD", "VACANCY_NO_CANDIDATE",
                   "VACANCY_WAITING")


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


#: Each WAITING patient's newest decision (the provider's SQL expression, evaluated once per patient:
#: MATERIALIZED keeps PostgreSQL from inlining it into both grouping keys), counted by status and expiry.
DECISION_FRESHNESS_SQL = """
WITH x AS MATERIALIZED ({patients})
SELECT x.latest ->> 'status', (x.latest ->> 'expires_at')::timestamptz <= %s, COUNT(*)
FROM x GROUP BY 1, 2
"""


def decision_freshness(*, clinic: Clinic, now: datetime) -> dict:
    """Newest booking-reliability decision of each WAITING patient: FRESH/STALE/UNAVAILABLE/MISSING counts,
    read through the ``DecisionProvider`` like every decision read, in one query: its ``newest_expression``
    per patient, counted in SQL by (status, expired). The one rule that turns a decision into its effective
    status (``Decision.effective_status``) is applied to each group in Python; the query's size does not
    grow with the number of waiting patients (it used to send every patient id, in batches)."""
    counts = {"FRESH": 0, "STALE": 0, "UNAVAILABLE": 0, "MISSING": 0}
    waiting = WaitlistEntry.objects.filter(clinic=clinic, status=EntryStatus.WAITING).values("patient_id")
    patients = (
        Patient.objects.filter(pk__in=waiting)
        .annotate(latest=get_decision_provider().newest_expression(clinic=clinic, patient=OuterRef("pk")))
        .values("latest")
        .order_by()
    )
    inner, params = patients.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(DECISION_FRESHNESS_SQL.format(patients=inner), [*params, now])
        groups = cursor.fetchall()
    for status, expired, n in groups:
        if status is None:
            counts["MISSING"] += n
            continue
        # A representative expiry: ``now`` when the group's decisions are past theirs, else none.
        effective = Decision("", status, 0, now if expired else None).effective_status(now)
        counts[effective if effective in counts else DecisionStatus.STALE] += n
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


def ops_snapshot(*, clinic: Clinic, now: datetime | None = None, queue_limit: int = 50) -> dict:
    """Readiness, fill metrics and the first page of the action queue for one clinic (STAFF read)."""
    now = now or timezone.now()
    policies = WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version")
    policy = policies.values("version", "ref", "decision_gate").first()
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
            "warnings": readiness_warnings(
                clinic=clinic, now=now, decision_gate=policy["decision_gate"] if policy else None
            ),
            "outbox": outbox_health(clinic=clinic, now=now),
            "jobs": jobs,
        },
        "metrics": fill_metrics(clinic=clinic, now=now),
        "fairness": fairness_metrics_cached(clinic=clinic, now=now, window_days=_metrics_window_days()),
        "shadow": shadow_summary(clinic=clinic),
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
    - ``OFFER_WITHOUT_HOLD``: an active offer whose hold no longer reserves the slot (reconcile finding);
    - ``VACANCY_NO_CANDIDATE``: an open vacancy, not started, whose candidate list ran out (since ``exhausted_at``);
    - ``VACANCY_WAITING``: an open vacancy held back (quiet hours, contact caps) until too close to its start.

    Each row: ``kind``, ``ref`` (the row to act on), ``at``, ``reason_code``, related refs,
    ``policy_version`` and ``decision_ref``. Refs and codes only. ``next`` is the cursor of the next page.
    """
    now = now or timezone.now()
    limit = max(1, min(int(limit), 200))
    position = cursor_decode(after)
    since = position[0] if position else None
    rows: list[dict] = []

    def bounded(qs, field, kind, ref_field="ref"):
        """The full keyset bound ``(at, kind, ref) > after`` in SQL for a source of one ``kind`` (a bare
        ``at >= since`` would return the same first ``limit`` rows again when more than ``limit`` rows
        share the cursor's timestamp). Refs compare in the "C" collation, as Python's merge sort does."""
        qs = qs.annotate(_key=Collate(ref_field, "C"))
        if not since:
            return qs
        _at, cursor_kind, cursor_ref = cast(tuple[datetime, str, str], position)  # ``since`` implies it
        if kind > cursor_kind:
            return qs.filter(**{f"{field}__gte": since})
        if kind < cursor_kind:
            return qs.filter(**{f"{field}__gt": since})
        return qs.filter(Q(**{f"{field}__gt": since}) | Q(**{field: since, "_key__gt": cursor_ref}))

    current_policy = WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version").values("version")[:1]
    in_review = Vacancy.objects.filter(clinic=clinic, status=VacancyStatus.REVIEW)
    reviews = bounded(in_review, "updated_at", "VACANCY_REVIEW").annotate(
        policy_version=Subquery(current_policy),
    ).values("ref", "updated_at", "review_entry__ref", "review_entry__patient_id", "policy_version")
    for v in _with_review_decisions(list(reviews.order_by("updated_at", "_key")[:limit]), clinic):
        decision = v["review_decision"]
        rows.append({"kind": "VACANCY_REVIEW", "ref": v["ref"], "_at": v["updated_at"],
                     "reason_code": f"DECISION_{decision.status if decision else 'UNAVAILABLE'}", "vacancy": v["ref"],
                     "entry": v["review_entry__ref"], "policy_version": v["policy_version"],
                     "decision_ref": decision.decision_ref if decision else None})

    last_code = OfferEvent.objects.filter(
        offer=OuterRef("pk"), reason_code__in=["BOOKING_STUCK", "BOOKING_RETRY_FAILED"]
    ).order_by("-id").values("detail__code")[:1]
    stuck_offers = stuck_accepted_offers(now=now).filter(clinic=clinic)
    stuck = bounded(stuck_offers, "updated_at", "BOOKING_STUCK", "hold__ref").annotate(
        last_code=Subquery(last_code)
    ).values("ref", "updated_at", "hold__ref", "vacancy__ref", "entry__ref", "policy_version", "decision_ref",
             "last_code")
    for o in stuck.order_by("updated_at", "_key")[:limit]:
        rows.append({"kind": "BOOKING_STUCK", "ref": o["hold__ref"], "_at": o["updated_at"],
                     "reason_code": o["last_code"] or "NOT_BOOKED", "offer": o["ref"], "hold": o["hold__ref"],
                     "vacancy": o["vacancy__ref"], "entry": o["entry__ref"], "policy_version": o["policy_version"],
                     "decision_ref": o["decision_ref"]})

    offer_facts = Offer.objects.filter(clinic=clinic, ref=OuterRef("aggregate_ref"))
    dead = bounded(
        OutboxMessage.objects.filter(clinic_ref=clinic.ref, topic=OFFER_TOPIC, status=OutboxStatus.DEAD), "created_at",
        "DELIVERY_DEAD",
    ).annotate(
        offer_status=Subquery(offer_facts.values("status")[:1]),
        policy_version=Subquery(offer_facts.values("policy_version")[:1]),
        decision_ref=Subquery(offer_facts.values("decision_ref")[:1]),
    ).values("ref", "created_at", "aggregate_ref", "last_error_code", "attempts", "offer_status", "policy_version",
             "decision_ref")
    for m in dead.order_by("created_at", "_key")[:limit]:
        rows.append({"kind": "DELIVERY_DEAD", "ref": m["ref"], "_at": m["created_at"],
                     "reason_code": m["last_error_code"] or "DEAD", "offer": m["aggregate_ref"],
                     "offer_status": m["offer_status"], "attempts": m["attempts"],
                     "policy_version": m["policy_version"], "decision_ref": m["decision_ref"]})

    broken = bounded(offers_without_active_hold().filter(clinic=clinic), "created_at", "OFFER_WITHOUT_HOLD").values(
        "ref", "created_at", "status", "hold__ref", "hold__status", "vacancy__ref", "policy_version", "decision_ref")
    for o in broken.order_by("created_at", "_key")[:limit]:
        rows.append({"kind": "OFFER_WITHOUT_HOLD", "ref": o["ref"], "_at": o["created_at"],
                     "reason_code": f"HOLD_{o['hold__status']}", "offer": o["ref"], "offer_status": o["status"],
                     "hold": o["hold__ref"], "vacancy": o["vacancy__ref"], "policy_version": o["policy_version"],
                     "decision_ref": o["decision_ref"]})

    rows += _unoffered_vacancy_rows(clinic, now, limit, bounded)

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


def unoffered_vacancies(*, clinic: Clinic, now: datetime):
    """OPEN vacancies, not started, with no active offer (the queue's and the overview's one definition)."""
    active = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)
    return Vacancy.objects.filter(clinic=clinic, status=VacancyStatus.OPEN, starts_at__gt=now).exclude(Exists(active))


def _waiting_lead(clinic: Clinic) -> timedelta:
    """How close to its start a waiting vacancy needs a person: the policy's minimum lead and answer margin."""
    minutes = WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version").values_list(
        "min_lead_minutes", "answer_window_margin_minutes").first() or (0, 0)
    return timedelta(minutes=sum(int(v or 0) for v in minutes))


def _unoffered_vacancy_rows(clinic: Clinic, now: datetime, limit: int, bounded) -> list[dict]:
    """The queue's two vacancy sources: no candidate (the list ran out), and waiting past its lead time."""
    fields = ("ref", "starts_at", "waiting_reason", "waiting_until", "exhausted_at", "updated_at")
    unoffered = unoffered_vacancies(clinic=clinic, now=now)
    empty = bounded(unoffered.filter(exhausted_at__isnull=False, waiting_reason=""), "exhausted_at",
                    "VACANCY_NO_CANDIDATE").values(*fields)
    rows = [{"kind": "VACANCY_NO_CANDIDATE", "ref": v["ref"], "_at": v["exhausted_at"], "reason_code": "NO_CANDIDATE",
             "vacancy": v["ref"], "starts_at": iso_in_zone(v["starts_at"], clinic.timezone)}
            for v in empty.order_by("exhausted_at", "_key")[:limit]]
    late = Q(waiting_until__isnull=True) | Q(waiting_until__gte=F("starts_at") - _waiting_lead(clinic))
    waiting = bounded(unoffered.exclude(waiting_reason="").filter(late), "updated_at",
                      "VACANCY_WAITING").values(*fields)
    rows += [{"kind": "VACANCY_WAITING", "ref": v["ref"], "_at": v["updated_at"], "reason_code": v["waiting_reason"],
              "vacancy": v["ref"], "starts_at": iso_in_zone(v["starts_at"], clinic.timezone),
              "until": iso_in_zone(v["waiting_until"], clinic.timezone) if v["waiting_until"] else None}
             for v in waiting.order_by("updated_at", "_key")[:limit]]
    return rows


# --- operations console: evidence per queue row, the vacancy panel, and the commands each allows ---

#: Hard-eligibility checks shown as evidence: every rule of ``eligibility.RULES`` (the one definition the
#: matcher's page and ``matcher.ineligibility`` are generated from), by its check name.
ELIGIBILITY_CHECKS = eligibility.CHECK_NAMES


def _review_vacancies(clinic: Clinic, now: datetime):
    """Vacancies with their review candidate's eligibility evaluated in SQL (one row each, no N+1): the
    rules of ``eligibility.RULES`` bound to each vacancy's own columns, as one boolean array."""
    binding = eligibility.vacancy_row_binding(
        now=now, week_ago=now - timedelta(days=7), channels=list(provider_channels(clinic.settings)),
        non_barring=list(NON_BARRING_WITHDRAW_REASONS),
    )
    checks, params = eligibility.checks_sql(binding)
    current_policy = WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version").values("version")[:1]
    return Vacancy.objects.filter(clinic=clinic).annotate(
        review_checks=RawSQL(
            f"SELECT {checks} FROM waitlist_waitlistentry e WHERE e.id = waitlist_vacancy.review_entry_id",
            params, output_field=ArrayField(BooleanField()),
        ),
        has_active_offer=Exists(Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)),
        current_policy_version=Subquery(current_policy),
    )


def _with_review_decisions(rows: list[dict], clinic: Clinic) -> list[dict]:
    """Each review candidate's decision, through the ``DecisionProvider`` (one batch for all rows)."""
    decisions = get_decision_provider().decisions_for(
        clinic=clinic, patient_ids={v["review_entry__patient_id"] for v in rows if v["review_entry__patient_id"]}
    )
    for v in rows:
        decision = decisions.get(v["review_entry__patient_id"])
        v["review_decision"] = decision
    return rows


REVIEW_VACANCY_FIELDS = (
    "ref", "status", "version", "starts_at", "ends_at", "close_reason", "exhausted_at", "created_at",
    "waiting_reason", "waiting_until", "practitioner_id",
    "review_entry__ref", "review_entry__practitioner_id", "review_entry__priority_rank",
    "review_entry__waiting_since", "review_entry__status", "review_entry__patient_id",
    "current_policy_version", "has_active_offer", "review_checks",
)


def _effective(decision: Decision | None, now: datetime) -> str:
    return decision.effective_status(now) if decision is not None else DecisionStatus.UNAVAILABLE


def ops_commands(
    *, vacancy_status: str, starts_at: datetime, has_active_offer: bool, in_review: bool, now: datetime,
    offer: dict | None = None,
) -> list[dict]:
    """The recovery commands that apply to a vacancy/offer in its current state (roles are the console's):
    ``withdraw`` an active unbooked offer, ``retry_booking`` an ACCEPTED hold, ``redispatch`` a dispatchable
    vacancy with no active offer, ``review`` (PROMOTE/SKIP) a vacancy in staff review."""
    commands = []
    if offer and offer["status"] in ACTIVE_OFFER_STATUSES and offer["hold_status"] != "CONSUMED":
        commands.append({"name": "withdraw", "target": offer["ref"]})
    if offer and offer["status"] == OfferStatus.ACCEPTED and offer["hold_status"] == "ACCEPTED":
        commands.append({"name": "retry_booking", "target": offer["hold"]})
    dispatchable = vacancy_status in DISPATCHABLE_VACANCY_STATUSES and starts_at > now
    if dispatchable and in_review:
        commands.append({"name": "review", "target": None})
    if dispatchable and not has_active_offer:
        commands.append({"name": "redispatch", "target": None})
    return commands


def _review_evidence(v: dict, clinic: Clinic, now: datetime) -> dict:
    return {
        "vacancy": v["ref"],
        "vacancy_status": v["status"],
        "vacancy_version": v["version"],
        "starts_at": iso_in_zone(v["starts_at"], clinic.timezone),
        "entry": v["review_entry__ref"],
        "entry_status": v["review_entry__status"],
        "slot_fit": 1 if v["review_entry__practitioner_id"] == v["practitioner_id"] else 0,
        "priority_rank": v["review_entry__priority_rank"],
        "waiting_since": iso_in_zone(v["review_entry__waiting_since"], clinic.timezone)
        if v["review_entry__waiting_since"] else None,
        "policy_version": v["current_policy_version"],
        "decision_ref": v["review_decision"].decision_ref if v["review_decision"] else None,
        "decision_status": _effective(v["review_decision"], now),
        "checks": [{"name": name, "passed": passed} for name, passed in zip(ELIGIBILITY_CHECKS, v["review_checks"],
                                                                            strict=True)]
        if v["review_entry__ref"] and v["review_checks"] else [],
        "checks_at": "now",
        "offer": None,
    }


OFFER_EVIDENCE_FIELDS = (
    "ref", "status", "version", "slot_fit", "policy_version", "decision_ref", "decision_status",
    "decision_expires_at", "expires_at", "created_at", "reason_code", "decline_reason", "notified_at",
    "entry__ref", "entry__priority_rank",
    "entry__waiting_since", "entry__status", "hold__ref", "hold__status", "vacancy__ref", "vacancy__status",
    "vacancy__version", "vacancy__starts_at", "vacancy_has_active_offer", "hold__appointment__ref", "standing",
)


def _offer_evidence(o: dict, clinic: Clinic) -> dict:
    tz = clinic.timezone
    return {
        "vacancy": o["vacancy__ref"],
        "vacancy_status": o["vacancy__status"],
        "vacancy_version": o["vacancy__version"],
        "starts_at": iso_in_zone(o["vacancy__starts_at"], tz),
        "entry": o["entry__ref"],
        "entry_status": o["entry__status"],
        "slot_fit": o["slot_fit"],
        "priority_rank": o["entry__priority_rank"],
        "waiting_since": iso_in_zone(o["entry__waiting_since"], tz),
        "policy_version": o["policy_version"],
        "decision_ref": o["decision_ref"],
        "decision_status": o["decision_status"],
        # An offer exists only if every hard check passed under the vacancy fence (its MATCHED event).
        "checks": [{"name": name, "passed": True} for name in ELIGIBILITY_CHECKS],
        "checks_at": "promotion",
        "offer": {
            "ref": o["ref"], "status": o["status"], "version": o["version"], "hold": o["hold__ref"],
            "hold_status": o["hold__status"], "expires_at": iso_in_zone(o["expires_at"], tz),
            "created_at": iso_in_zone(o["created_at"], tz), "reason_code": o["reason_code"],
            "decline_reason": o["decline_reason"],
            "notified_at": iso_in_zone(o["notified_at"], tz) if o["notified_at"] else None,
            "appointment": o["hold__appointment__ref"], "standing": o["standing"],
        },
    }


def _offers_with_evidence(clinic: Clinic):
    active = Offer.objects.filter(vacancy=OuterRef("vacancy"), status__in=ACTIVE_OFFER_STATUSES)
    return Offer.objects.filter(clinic=clinic).annotate(vacancy_has_active_offer=Exists(active))


def ops_queue_evidence(*, clinic: Clinic, items: list[dict], now: datetime | None = None) -> list[dict]:
    """The action queue's rows with ``evidence`` (eligibility checks, ordering key, policy version,
    decision ref and status, offer/hold state) and the ``commands`` that apply, for one page of rows in
    two queries whatever its size (one over the review vacancies, one over the offers)."""
    now = now or timezone.now()
    review_refs = [i["vacancy"] for i in items if i["kind"] == "VACANCY_REVIEW"]
    offer_refs = [i["offer"] for i in items if i.get("offer")]
    reviews = {
        v["ref"]: v for v in _with_review_decisions(
            list(_review_vacancies(clinic, now).filter(ref__in=review_refs).values(*REVIEW_VACANCY_FIELDS)), clinic)
    } if review_refs else {}
    unoffered = _unoffered_evidence(clinic, [i["vacancy"] for i in items if i["kind"] in UNOFFERED_KINDS])
    offers = {
        o["ref"]: o for o in _offers_with_evidence(clinic).filter(ref__in=offer_refs).values(*OFFER_EVIDENCE_FIELDS)
    } if offer_refs else {}
    rows = []
    for item in items:
        evidence, commands = None, []
        if item["kind"] == "VACANCY_REVIEW" and item["vacancy"] in reviews:
            v = reviews[item["vacancy"]]
            evidence = _review_evidence(v, clinic, now)
            commands = ops_commands(vacancy_status=v["status"], starts_at=v["starts_at"],
                                    has_active_offer=v["has_active_offer"], in_review=v["status"] == "REVIEW",
                                    now=now)
        elif item.get("offer") in offers:
            o = offers[item["offer"]]
            evidence = _offer_evidence(o, clinic)
            commands = ops_commands(vacancy_status=o["vacancy__status"], starts_at=o["vacancy__starts_at"],
                                    has_active_offer=o["vacancy_has_active_offer"], in_review=False, now=now,
                                    offer=evidence["offer"])
        elif item["kind"] in UNOFFERED_KINDS and item["vacancy"] in unoffered:
            evidence = unoffered[item["vacancy"]]
            commands = [{"name": "redispatch", "target": None}]
        for command in commands:
            command["target"] = command["target"] or (evidence or {}).get("vacancy")
        rows.append({**item, "evidence": evidence, "commands": commands})
    return rows


UNOFFERED_KINDS = ("VACANCY_NO_CANDIDATE", "VACANCY_WAITING")


def _unoffered_evidence(clinic: Clinic, refs: list[str]) -> dict[str, dict]:
    """The evidence of the queue's vacancy rows: slot, waiting reason and the pass-over counts by reason
    (two queries for a page)."""
    if not refs:
        return {}
    tz = clinic.timezone
    vacancies = list(Vacancy.objects.filter(clinic=clinic, ref__in=refs).values(
        "id", "ref", "status", "version", "starts_at", "waiting_reason", "waiting_until", "exhausted_at"))
    reasons = dispatch_reasons_by_vacancy(clinic=clinic, vacancy_ids=[v["id"] for v in vacancies])
    return {v["ref"]: {
        "vacancy": v["ref"], "vacancy_status": v["status"], "vacancy_version": v["version"],
        "starts_at": iso_in_zone(v["starts_at"], tz), "offer": None, "entry": None, "checks": [],
        "passed_over": reasons.get(v["id"], []),
        "waiting": {"reason": v["waiting_reason"], "until": iso_in_zone(v["waiting_until"], tz)
                    if v["waiting_until"] else None} if v["waiting_reason"] else None,
    } for v in vacancies}


def dispatch_notes(*, clinic: Clinic, vacancy_id: int, limit: int = 30) -> list[dict]:
    """Why dispatch passed over entries of this vacancy (or why it waits), newest first: one query."""
    tz = clinic.timezone
    rows = (
        DispatchNote.objects.filter(clinic=clinic, vacancy_id=vacancy_id)
        .order_by("-last_at", "-id")
        .values("entry__ref", "reason_code", "until", "times", "first_at", "last_at")[:limit]
    )
    return [
        {"entry": r["entry__ref"], "reason_code": r["reason_code"],
         "until": iso_in_zone(r["until"], tz) if r["until"] else None, "times": r["times"],
         "first_at": iso_in_zone(r["first_at"], tz), "last_at": iso_in_zone(r["last_at"], tz)}
        for r in rows
    ]


def ops_vacancy_panel(
    *, clinic: Clinic, vacancy_ref: str, now: datetime | None = None, events: int = 30, notes: int = 30
) -> dict:
    """One vacancy for the console's detail panel: state, slot, why it waits (quiet hours, caps), who was
    passed over and why, review candidate with evidence, its offers (each with ordering key, policy
    version, decision ref and status, hold, decline reason), the latest offer events, and the commands
    that apply. Four queries; a foreign or unknown ref is NotFound."""
    from common.errors import NotFound

    now = now or timezone.now()
    tz = clinic.timezone
    if not isinstance(vacancy_ref, str):
        raise NotFound()
    found = _with_review_decisions(list(_review_vacancies(clinic, now).filter(ref=vacancy_ref).values(
        *REVIEW_VACANCY_FIELDS, "id", "practitioner__ref", "treatment__ref", "resource__ref",
        "practitioner__name", "treatment__name", "source_appointment__ref", "source_appointment__status",
        "source_appointment__cancel_reason", "source_appointment__updated_at")), clinic)
    if not found:
        raise NotFound()
    v = found[0]
    offers = [
        _offer_evidence(o, clinic)
        for o in _offers_with_evidence(clinic).filter(vacancy_id=v["id"]).order_by("created_at", "id")
        .values(*OFFER_EVIDENCE_FIELDS)
    ]
    history = list(
        OfferEvent.objects.filter(clinic=clinic, offer__vacancy_id=v["id"]).order_by("-id")
        .values("offer__ref", "from_status", "to_status", "reason_code", "actor", "correlation_id", "created_at")
        [:events]
    )
    active = next((o["offer"] for o in offers if o["offer"]["status"] in ACTIVE_OFFER_STATUSES), None)
    commands = ops_commands(vacancy_status=v["status"], starts_at=v["starts_at"], has_active_offer=active is not None,
                            in_review=v["status"] == "REVIEW" and v["review_entry__ref"] is not None, now=now,
                            offer=active)
    for command in commands:
        command["target"] = command["target"] or v["ref"]
    return {
        "vacancy": v["ref"],
        "status": v["status"],
        "version": v["version"],
        "close_reason": v["close_reason"],
        "starts_at": iso_in_zone(v["starts_at"], tz),
        "ends_at": iso_in_zone(v["ends_at"], tz),
        "created_at": iso_in_zone(v["created_at"], tz),
        "exhausted_at": iso_in_zone(v["exhausted_at"], tz) if v["exhausted_at"] else None,
        "waiting": {"reason": v["waiting_reason"], "until": iso_in_zone(v["waiting_until"], tz)}
        if v["waiting_reason"] else None,
        "passed_over": dispatch_notes(clinic=clinic, vacancy_id=v["id"], limit=notes),
        "reasons": dispatch_reasons_by_vacancy(clinic=clinic, vacancy_ids=[v["id"]]).get(v["id"], []),
        "source_appointment": {
            "ref": v["source_appointment__ref"], "status": v["source_appointment__status"],
            "cancel_reason": v["source_appointment__cancel_reason"],
            "cancelled_at": iso_in_zone(v["source_appointment__updated_at"], tz),
        } if v["source_appointment__ref"] else None,
        "booked_appointment": next((o["offer"]["appointment"] for o in offers if o["offer"]["appointment"]), None),
        "practitioner": v["practitioner__ref"],
        "treatment": v["treatment__ref"],
        # Names are not patient data: staff read "Dr. Seo · Physiotherapy", not two refs.
        "practitioner_name": v["practitioner__name"],
        "treatment_name": v["treatment__name"],
        "resource": v["resource__ref"],
        "review": _review_evidence(v, clinic, now) if v["review_entry__ref"] and v["status"] == "REVIEW" else None,
        "offers": offers,
        "active_offer": active,
        "events": [
            {"offer": e["offer__ref"], "from_status": e["from_status"], "to_status": e["to_status"],
             "reason_code": e["reason_code"], "actor": e["actor"], "correlation_id": e["correlation_id"],
             "created_at": iso_in_zone(e["created_at"], tz)}
            for e in history
        ],
        "commands": commands,
    }


def ops_vacancy_ref(*, clinic: Clinic, offer_ref: str = "", hold_ref: str = "") -> str | None:
    """The vacancy of an offer (by its ref or its hold's ref) in this clinic, for the console's panel."""
    offers = Offer.objects.filter(clinic=clinic)
    offers = offers.filter(ref=offer_ref) if offer_ref else offers.filter(hold__ref=hold_ref)
    return offers.values_list("vacancy__ref", flat=True).first()


# --- reconcile findings (read by the loop's reconcile and by the console) ---


def booking_retry_minutes() -> int:
    return int(getattr(settings, "WAITLIST_BOOKING_RETRY_MINUTES", 5))


def stuck_accepted_offers(*, now: datetime):
    """ACCEPTED offers whose booking command started (the ON_ACCEPT claim page asked to book) but whose
    hold is still ACCEPTED N minutes later. An ACCEPTED offer nobody asked to book is not stuck: it
    waits for its booking command until its hold expires."""
    return Offer.objects.filter(
        status=OfferStatus.ACCEPTED,
        hold__status=HoldStatus.ACCEPTED,
        booking_requested_at__isnull=False,
        booking_requested_at__lte=now - timedelta(minutes=booking_retry_minutes()),
    )


def offers_without_active_hold():
    """Active offers (not yet booked) whose hold no longer reserves the slot: invariant 2 broken."""
    active_allocation = CapacityAllocation.objects.filter(hold=OuterRef("hold"), active=True)
    return Offer.objects.filter(status__in=ACTIVE_OFFER_STATUSES).exclude(hold__status=HoldStatus.CONSUMED).filter(
        Q(hold__status=HoldStatus.RELEASED) | ~Exists(active_allocation)
    )


# --- why a vacancy has no offer (the console's queue and panel, the API's dispatch answer) ---


def dispatch_reasons_by_vacancy(*, clinic: Clinic, vacancy_ids: list[int]) -> dict[int, list[dict]]:
    """Per vacancy, how many entries dispatch passed over for each reason (``DispatchNote``), most first:
    one grouped query for any number of vacancies. Vacancy-wide notes (quiet hours) count as one."""
    rows = (
        DispatchNote.objects.filter(clinic=clinic, vacancy_id__in=vacancy_ids)
        .values("vacancy_id", "reason_code")
        .annotate(entries=Count("id"), until=Max("until"))
        .order_by("vacancy_id", "-entries", "reason_code")
    )
    reasons: dict[int, list[dict]] = {}
    for r in rows:
        until = iso_in_zone(r["until"], clinic.timezone) if r["until"] else None
        reasons.setdefault(r["vacancy_id"], []).append(
            {"reason_code": r["reason_code"], "entries": r["entries"], "until": until})
    return reasons


def dispatch_reasons(*, clinic: Clinic, vacancy: Vacancy, stats=None) -> dict:
    """Why a vacancy has no offer now: the pass-over counts by reason, the waiting reason and until when,
    and (right after a dispatch, from the matcher's ``stats``) how many candidates it read and any budget
    that cut the read short."""
    tz = clinic.timezone
    body: dict = {
        "passed_over": dispatch_reasons_by_vacancy(clinic=clinic, vacancy_ids=[vacancy.pk]).get(vacancy.pk, []),
        "waiting": {"reason": vacancy.waiting_reason, "until": iso_in_zone(vacancy.waiting_until, tz)
                    if vacancy.waiting_until else None} if vacancy.waiting_reason else None,
        "exhausted_at": iso_in_zone(vacancy.exhausted_at, tz) if vacancy.exhausted_at else None,
    }
    if stats is not None:
        body["candidates_read"] = stats.candidates
        body["budget_hit"] = stats.budget_hit or None
    return body


def open_vacancies_soon(*, clinic: Clinic, now: datetime | None = None, limit: int = 20) -> dict:
    """Open vacancies (and ones in review) starting today or tomorrow in the clinic's zone, soonest first,
    each with its active offer's state: the Waitlist page's at-a-glance block (one query)."""
    from zoneinfo import ZoneInfo

    now = now or timezone.now()
    today = now.astimezone(ZoneInfo(clinic.timezone)).date()
    start, _ = day_bounds(today, clinic.timezone)
    _, end = day_bounds(today + timedelta(days=1), clinic.timezone)
    active = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES).order_by("-id")
    rows = (
        Vacancy.objects.filter(clinic=clinic, status__in=DISPATCHABLE_VACANCY_STATUSES, starts_at__gte=max(start, now),
                               starts_at__lt=end)
        .annotate(offer_status=Subquery(active.values("status")[:1]), offer_expires=Subquery(active.values(
            "expires_at")[:1]))
        .order_by("starts_at", "id")
        .values("ref", "status", "starts_at", "waiting_reason", "exhausted_at", "offer_status", "offer_expires",
                "practitioner__name", "treatment__name")[:limit]
    )
    tz = clinic.timezone
    return {"today": today.isoformat(), "rows": [
        {**r, "starts_at": iso_in_zone(r["starts_at"], tz), "local_day": r["starts_at"].astimezone(
            ZoneInfo(tz)).date() == today,
         "offer_expires": iso_in_zone(r["offer_expires"], tz) if r["offer_expires"] else None}
        for r in rows]}


def entry_activity(*, clinic: Clinic, entry_ref: str, limit: int = 50) -> list[dict]:
    """An entry's timeline, newest first: its offers' events (claims, bookings, declines, releases), the
    pass-overs dispatch noted for it and its patient's consent changes (opt-outs). Refs and codes only;
    three queries."""
    entry = WaitlistEntry.objects.filter(clinic=clinic, ref=entry_ref).values("id", "patient_id").first()
    if entry is None:
        return []
    events = OfferEvent.objects.filter(clinic=clinic, offer__entry_id=entry["id"]).order_by("-id").values(
        "created_at", "offer__ref", "offer__vacancy__ref", "from_status", "to_status", "reason_code", "actor")[:limit]
    notes = DispatchNote.objects.filter(clinic=clinic, entry_id=entry["id"]).order_by("-last_at").values(
        "last_at", "vacancy__ref", "reason_code", "times")[:limit]
    consents = ContactConsent.objects.filter(patient_id=entry["patient_id"]).order_by("-id").values(
        "recorded_at", "channel", "state", "source", "actor")[:limit]
    rows = [{"at": e["created_at"], "kind": "offer", "ref": e["offer__ref"], "vacancy": e["offer__vacancy__ref"],
             "code": e["reason_code"], "change": f"{e['from_status'] or 'new'} → {e['to_status']}", "actor": e["actor"]}
            for e in events]
    rows += [{"at": n["last_at"], "kind": "passed_over", "ref": n["vacancy__ref"], "vacancy": n["vacancy__ref"],
              "code": n["reason_code"], "change": f"passed over {n['times']}×", "actor": "system:dispatch"}
             for n in notes]
    rows += [{"at": c["recorded_at"], "kind": "consent", "ref": "", "vacancy": None, "code": c["state"],
              "change": f"{c['channel']} {c['state']} ({c['source']})", "actor": c["actor"]} for c in consents]
    rows.sort(key=lambda r: r["at"], reverse=True)
    return [{**r, "at": iso_in_zone(r["at"], clinic.timezone)} for r in rows[:limit]]
