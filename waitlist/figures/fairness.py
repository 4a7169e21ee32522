"""Fairness reads for the ops snapshot: who the waitlist served, who it passed over and who it forgot.

Three SQL statements whatever the waitlist's size (aggregates run in PostgreSQL; nothing loads the
waitlist into Python). Refs and counts only. Definitions (docs/waitlist.md "Fairness metrics"):

* **Wait reduction**, over the entries booked through an offer in the window plus the entries still
  on the list: per priority band and per waiting-time quartile (``ntile(4)`` by ``waiting_since``; Q1
  waited longest) the count, how many were booked, the median days waited, and the days sooner
  gained = the entry's ``latest`` minus the booked slot's start (the product does not know the
  patient's other appointment, so the end of the window they asked for stands in for it).
* **Pass-overs**, for each offer made in the window: every other entry that was on the list then,
  had waited longer, fitted the slot (treatment, practitioner, window, not the cancelling patient),
  was not offered this vacancy earlier and held no other open offer. Reason, first that applies:
  ``PRIORITY`` (the offered entry's rank was higher), ``SLOT_FIT`` (it named the practitioner, the
  other takes anyone), ``STAFF_SKIPPED``, ``DECLINE_SUPPRESSION`` (declined within the policy's
  hours before), ``WEEKLY_CAP`` (the policy's cap reached in the 7 days before), ``OTHER`` (a
  non-fresh decision, a matcher budget, a row locked by another dispatcher).
* **Longest waiting without an offer while eligible**: WAITING entries with no offer in the window
  that fitted at least one vacancy opened in the window (after they joined), longest first.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from common import effects
from common.degrade import REDIS_ERRORS, cache_dependency
from common.timefmt import iso_in_zone
from scheduling.models import Clinic
from waitlist import queries

PASSOVER_REASONS = ("PRIORITY", "SLOT_FIT", "STAFF_SKIPPED", "DECLINE_SUPPRESSION", "WEEKLY_CAP", "OTHER")


def _days(value) -> float | None:
    return round(float(value), 1) if value is not None else None


def fairness_metrics(*, clinic: Clinic, now: datetime | None = None, window_days: int = 30,
                     longest_limit: int = 10) -> dict:
    """Wait reduction by band and waiting quartile, pass-overs by reason, and the entries waiting
    longest without an offer while eligible (three statements)."""
    now = now or timezone.now()
    params: dict[str, Any] = {
        "clinic": clinic.pk, "since": now - timedelta(days=window_days), "now": now, "limit": longest_limit
    }
    groups: dict[str, list] = {"band": [], "quartile": []}
    for kind, group, entries, booked, waited, sooner, sooner_total in queries.fairness_wait_reduction(params):
        groups[kind].append({
            "band" if kind == "band" else "quartile": group if kind == "band" else f"Q{group}",
            "entries": entries,
            "booked": booked,
            "waited_days_p50": _days(waited),
            "days_sooner_p50": _days(sooner),
            "days_sooner_per_entry": _days((sooner_total or 0) / entries) if entries else None,
        })
    reasons = {reason: {"passovers": 0, "entries": 0} for reason in PASSOVER_REASONS}
    for reason, count, entries in queries.fairness_passovers(params):
        reasons[reason] = {"passovers": count, "entries": entries}
    forgotten = [
        {"entry": ref, "patient": patient_ref, "priority_rank": rank,
         "waiting_since": iso_in_zone(since, clinic.timezone),
         "waiting_days": _days((now - since).total_seconds() / 86400), "eligible_vacancies": eligible}
        for ref, patient_ref, since, rank, eligible in queries.fairness_forgotten(params)
    ]
    groups["band"].sort(key=lambda g: -g["band"])
    groups["quartile"].sort(key=lambda g: g["quartile"])
    return {
        "window_days": window_days,
        "wait_reduction": {"by_band": groups["band"], "by_wait_quartile": groups["quartile"]},
        "passovers": {"total": sum(r["passovers"] for r in reasons.values()), "by_reason": reasons},
        "longest_waiting_without_offer": forgotten,
    }


#: After-commit effect (``common.effects``): recompute a clinic's figures in the background.
FAIRNESS_REFRESH_EFFECT = "waitlist.fairness_refresh"
#: How long computed figures are kept for a clinic nobody looks at (the next look computes them again).
FAIRNESS_KEEP_SECONDS = 3600
#: Figures are refreshed no sooner than this many times the last computation's duration after it: the pass-over
#: count grows with offers × longer waiters (67 s of SQL at the storm's big clinic after 5,000 offers over 30,000
#: entries), and a refresh every 5 minutes there took a fifth of a core; so a refresh costs at most a twentieth.
FAIRNESS_COST_FACTOR = 20
#: What times a computation (for ``FAIRNESS_COST_FACTOR``); tests give it a clock of their own.
refresh_clock = time.perf_counter


def _fairness_key(clinic_id: int, window_days: int) -> str:
    return f"waitlist:fairness:{clinic_id}:{window_days}"


def _refreshing_key(clinic_id: int, window_days: int) -> str:
    """Set while one background refresh of these figures is queued or running."""
    return f"{_fairness_key(clinic_id, window_days)}:refreshing"


def fairness_metrics_cached(*, clinic: Clinic, now: datetime | None = None, window_days: int = 30) -> dict:
    """``fairness_metrics`` as the console and the ops snapshot show it, with ``computed_at``. The pass-over
    count joins every offer of the window with the entries that waited longer, so at a busy clinic it costs
    seconds of database time: the figures are kept per clinic, and once they are older than
    ``WAITLIST_FAIRNESS_CACHE_SECONDS`` (or ``FAIRNESS_COST_FACTOR`` times the last computation's duration, if
    longer) a reader gets them as they are while one background refresh (one per clinic at a time) computes new
    ones, so no page load waits for them but the first in an hour
    (``FAIRNESS_KEEP_SECONDS``). 0: computed on every read. Redis down: computed every time."""
    now = now or timezone.now()
    seconds = int(getattr(settings, "WAITLIST_FAIRNESS_CACHE_SECONDS", 1800))
    if seconds <= 0:
        return _computed(clinic, now, window_days)
    try:
        kept = cache.get(_fairness_key(clinic.pk, window_days))
    except REDIS_ERRORS as exc:
        cache_dependency.failed(exc)
        return _computed(clinic, now, window_days)
    if kept is None:
        return fairness_refresh(clinic=clinic, now=now, window_days=window_days)
    if now.timestamp() - kept["at"] >= max(seconds, FAIRNESS_COST_FACTOR * kept.get("took", 0.0)):
        try:
            queued = cache.add(_refreshing_key(clinic.pk, window_days), 1, timeout=seconds)
        except REDIS_ERRORS as exc:
            cache_dependency.failed(exc)
            queued = False
        if queued:
            effects.after_commit(FAIRNESS_REFRESH_EFFECT, clinic_id=clinic.pk, window_days=window_days)
    return kept["value"]


def fairness_refresh(*, clinic: Clinic, now: datetime | None = None, window_days: int = 30) -> dict:
    """Compute a clinic's figures and keep them for ``fairness_metrics_cached`` (the background refresh, and
    a first read). Writes only the cache."""
    now = now or timezone.now()
    started = refresh_clock()
    value = _computed(clinic, now, window_days)
    took = refresh_clock() - started
    key = _fairness_key(clinic.pk, window_days)
    try:
        cache.set(key, {"at": now.timestamp(), "took": took, "value": value},
                  max(FAIRNESS_KEEP_SECONDS, int(2 * FAIRNESS_COST_FACTOR * took)))
        cache.delete(_refreshing_key(clinic.pk, window_days))
    except REDIS_ERRORS as exc:
        cache_dependency.failed(exc)
    return value


def _computed(clinic: Clinic, now: datetime, window_days: int) -> dict:
    return {**fairness_metrics(clinic=clinic, now=now, window_days=window_days),
            "computed_at": iso_in_zone(now, clinic.timezone)}


def shadow_summary(*, clinic: Clinic, differences: int = 10) -> dict | None:
    """The clinic's SHADOW policy (or the last decided one): agreement rate, differences by reason and
    the latest differences (refs). Three queries."""
    from django.db.models import Count, Q

    from waitlist.models import ShadowObservation, ShadowPolicy

    shadow = ShadowPolicy.objects.filter(clinic=clinic).order_by("-created_at", "-id").first()
    if shadow is None:
        return None
    counts = shadow.observations.aggregate(total=Count("id"), agreed=Count("id", filter=Q(agreed=True)))
    by_reason = dict(
        shadow.observations.filter(agreed=False).values_list("reason_code").annotate(n=Count("id")).order_by()
    )
    latest = (
        ShadowObservation.objects.filter(shadow=shadow, agreed=False)
        .order_by("-created_at", "-id")
        .values("vacancy__ref", "enforced_entry__ref", "shadow_entry__ref", "shadow_outcome", "reason_code",
                "created_at")[:differences]
    )
    return {
        "ref": shadow.ref,
        "status": shadow.status,
        "base_version": shadow.base_version,
        "promoted_version": shadow.promoted_version,
        "changes": shadow.changes,
        "observations": counts["total"],
        "agreed": counts["agreed"],
        "agreement_rate": round(counts["agreed"] / counts["total"], 4) if counts["total"] else None,
        "differences_by_reason": by_reason,
        "differences": [
            {"vacancy": d["vacancy__ref"], "enforced_entry": d["enforced_entry__ref"],
             "shadow_entry": d["shadow_entry__ref"], "shadow_outcome": d["shadow_outcome"],
             "reason_code": d["reason_code"], "at": iso_in_zone(d["created_at"], clinic.timezone)}
            for d in latest
        ],
    }
