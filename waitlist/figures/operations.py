"""The console's Waitlist page and ref pages: the snapshot (readiness, metrics, fairness, the first page of
the Action queue), the open vacancies of today and tomorrow, and an entry's activity timeline."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.db.models import OuterRef, Subquery
from django.utils import timezone

from common.pagination import day_bounds
from common.timefmt import iso_in_zone
from scheduling.models import Clinic, ContactConsent
from scheduling.services.features import feature_enabled
from waitlist.figures.fairness import fairness_metrics_cached, shadow_summary
from waitlist.figures.kept import FRESHNESS_SETTING, kept
from waitlist.figures.metrics import (
    decision_freshness,
    fill_metrics,
    metrics_window_days,
    outbox_health,
    readiness_warnings,
)
from waitlist.figures.queue import ops_action_queue
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    DispatchNote,
    JobRun,
    Offer,
    OfferEvent,
    Vacancy,
    WaitlistEntry,
    WaitlistPolicy,
)


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
            # Every WAITING patient's newest decision, counted: the page's heaviest read at a big clinic (tens of
            # ms), and decisions change over hours.
            "decision_freshness": kept("freshness", clinic, lambda: decision_freshness(clinic=clinic, now=now),
                                       setting=FRESHNESS_SETTING),
            "warnings": readiness_warnings(
                clinic=clinic, now=now, decision_gate=policy["decision_gate"] if policy else None
            ),
            "outbox": kept("outbox-health", clinic, lambda: outbox_health(clinic=clinic, now=now)),
            "jobs": jobs,
        },
        "metrics": kept("fill-metrics", clinic, lambda: fill_metrics(clinic=clinic, now=now)),
        "fairness": fairness_metrics_cached(clinic=clinic, now=now, window_days=metrics_window_days()),
        "shadow": shadow_summary(clinic=clinic),
        "action_queue": ops_action_queue(clinic=clinic, now=now, limit=queue_limit),
    }


def open_vacancies_soon(*, clinic: Clinic, now: datetime | None = None, limit: int = 20) -> dict:
    """Open vacancies (and ones in review) starting today or tomorrow in the clinic's zone, soonest first,
    each with its active offer's state: the Waitlist page's at-a-glance block (one query)."""
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
