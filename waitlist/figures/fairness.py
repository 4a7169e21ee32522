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
from django.db import connection
from django.utils import timezone

from common import effects
from common.cas import sql_states
from common.degrade import REDIS_ERRORS, cache_dependency
from common.timefmt import iso_in_zone
from scheduling.models import Clinic, Patient
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    OPEN_ENTRY_STATUSES,
    EntryStatus,
    Offer,
    OfferEvent,
    OfferStatus,
    Vacancy,
    VacancySkip,
    WaitlistEntry,
    WaitlistPolicy,
)
from waitlist.rules import eligibility

TABLES = {
    "entry": WaitlistEntry._meta.db_table,
    "offer": Offer._meta.db_table,
    "event": OfferEvent._meta.db_table,
    "vacancy": Vacancy._meta.db_table,
    "policy": WaitlistPolicy._meta.db_table,
    "skip": VacancySkip._meta.db_table,
    "patient": Patient._meta.db_table,
}

#: Whether an entry ``e`` fits a vacancy ``v``'s slot on the stored facts: the matcher's own hard-eligibility rules
#: (``eligibility.RULES``) that do not depend on the moment of matching (scope, treatment, practitioner, window,
#: not the cancelling patient); what changes with time (status, suppression, consent, earlier offers, the cap) is
#: judged by each read as of its own moment.
FIT_RULES = ("SCOPE", "TREATMENT", "PRACTITIONER", "WINDOW", "UNAVAILABLE", "CANCELLING_PATIENT")
_FIT_COLUMNS = {**eligibility.vacancy_columns("v"),
                "tz": "(SELECT z.timezone FROM scheduling_clinic z WHERE z.id = v.clinic_id)"}
FITS = eligibility.rules_sql(FIT_RULES, lambda name: (_FIT_COLUMNS[name], []))[0]

#: The states the statements name, from the models (``{open_entry}`` etc. in the templates).
STATES = {
    "open_entry": sql_states(OPEN_ENTRY_STATUSES),
    "active_offer": sql_states(ACTIVE_OFFER_STATUSES),
    "closed_entry": sql_states((EntryStatus.BOOKED, EntryStatus.WITHDRAWN)),
    "declined": sql_states(OfferStatus.DECLINED),
    "waiting": sql_states(EntryStatus.WAITING),
}

WAIT_REDUCTION_SQL = """
WITH booked AS (
    SELECT o.entry_id, v.starts_at, ev.created_at AS booked_at
    FROM {offer} o
    JOIN {event} ev ON ev.offer_id = o.id AND ev.reason_code = 'BOOKED'
    JOIN {vacancy} v ON v.id = o.vacancy_id
    WHERE o.clinic_id = %(clinic)s AND ev.created_at >= %(since)s
), pop AS (
    SELECT e.id, e.priority_rank, e.waiting_since, e.latest, b.starts_at, b.booked_at
    FROM {entry} e LEFT JOIN booked b ON b.entry_id = e.id
    WHERE e.clinic_id = %(clinic)s AND (b.entry_id IS NOT NULL OR e.status IN ({open_entry}))
), q AS (
    SELECT priority_rank, booked_at, ntile(4) OVER (ORDER BY waiting_since, id) AS quartile,
           EXTRACT(EPOCH FROM COALESCE(booked_at, %(now)s) - waiting_since) / 86400 AS waited_days,
           CASE WHEN booked_at IS NOT NULL
                THEN GREATEST(EXTRACT(EPOCH FROM latest - starts_at) / 86400, 0) END AS sooner_days
    FROM pop
)
SELECT 'band', priority_rank, COUNT(*), COUNT(booked_at),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY waited_days),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY sooner_days), SUM(sooner_days)
FROM q GROUP BY priority_rank
UNION ALL
SELECT 'quartile', quartile, COUNT(*), COUNT(booked_at),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY waited_days),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY sooner_days), SUM(sooner_days)
FROM q GROUP BY quartile
"""

#: The window's offers with what judging a pass-over needs of each (its vacancy's slot under the alias ``v`` that
#: ``{fits}`` names, its entry's rank, wait and resource, its policy's limits), read first (MATERIALIZED): joined
#: the other way round, the planner hashed every (entry, offer) pair of a treatment before comparing waits (20
#: million at the storm's big clinic: 50 of 67 s). One probe of the entry's offers answers both "offered this vacancy
#: before" and "held another open offer"; entries are counted per reason by grouping, not by sorting every pair.
PASSOVER_SQL = """
WITH v AS MATERIALIZED (
    SELECT v.id, v.clinic_id, v.tenant_group_id, v.treatment_id, v.practitioner_id, v.starts_at, v.ends_at,
           v.excluded_patient_id, o.slot_fit, o.created_at AS offered_at, x.id AS offered_entry,
           x.priority_rank AS offered_rank, x.waiting_since AS offered_since, x.resource_kind,
           p.decline_suppression_hours, p.weekly_offer_cap
    FROM {offer} o
    JOIN {entry} x ON x.id = o.entry_id
    JOIN {vacancy} v ON v.id = o.vacancy_id
    JOIN {policy} p ON p.id = o.policy_id
    WHERE o.clinic_id = %(clinic)s AND o.created_at >= %(since)s
)
SELECT reason, SUM(n)::bigint, COUNT(*) FROM (SELECT reason, passed, COUNT(*) AS n FROM (
    SELECT e.id AS passed, CASE
        WHEN e.priority_rank < v.offered_rank THEN 'PRIORITY'
        WHEN v.slot_fit = 1 AND e.practitioner_id IS NULL THEN 'SLOT_FIT'
        WHEN EXISTS (SELECT 1 FROM {skip} s WHERE s.vacancy_id = v.id AND s.entry_id = e.id) THEN 'STAFF_SKIPPED'
        WHEN EXISTS (SELECT 1 FROM {offer} d WHERE d.entry_id = e.id AND d.status IN ({declined})
                     AND d.updated_at <= v.offered_at
                     AND d.updated_at > v.offered_at - make_interval(hours => v.decline_suppression_hours))
            THEN 'DECLINE_SUPPRESSION'
        WHEN v.weekly_offer_cap IS NOT NULL AND (
            SELECT COUNT(*) FROM {offer} c WHERE c.clinic_id = v.clinic_id AND c.patient_id = e.patient_id
            AND c.created_at > v.offered_at - interval '7 days' AND c.created_at < v.offered_at
        ) >= v.weekly_offer_cap THEN 'WEEKLY_CAP'
        ELSE 'OTHER' END AS reason
    FROM v
    JOIN {entry} e ON {fits}
        AND e.id <> v.offered_entry AND e.resource_kind = v.resource_kind
        AND e.waiting_since < v.offered_since AND e.created_at <= v.offered_at
        AND NOT (e.status IN ({closed_entry}) AND e.updated_at <= v.offered_at)
    WHERE NOT EXISTS (SELECT 1 FROM {offer} b WHERE b.entry_id = e.id AND b.created_at <= v.offered_at
                      AND ((b.vacancy_id = v.id AND b.created_at < v.offered_at)
                           OR b.status IN ({active_offer}) OR b.updated_at > v.offered_at))
) t GROUP BY reason, passed) r GROUP BY reason
"""

FORGOTTEN_SQL = """
SELECT e.ref, pt.ref, e.waiting_since, e.priority_rank,
       (SELECT COUNT(*) FROM {vacancy} v WHERE {fits} AND v.created_at >= %(since)s
        AND v.created_at >= e.created_at) AS eligible
FROM {entry} e JOIN {patient} pt ON pt.id = e.patient_id
WHERE e.clinic_id = %(clinic)s AND e.status IN ({waiting})
  AND NOT EXISTS (SELECT 1 FROM {offer} o WHERE o.entry_id = e.id AND o.created_at >= %(since)s)
  AND EXISTS (SELECT 1 FROM {vacancy} v WHERE {fits} AND v.created_at >= %(since)s AND v.created_at >= e.created_at)
ORDER BY e.waiting_since, e.id
LIMIT %(limit)s
"""

PASSOVER_REASONS = ("PRIORITY", "SLOT_FIT", "STAFF_SKIPPED", "DECLINE_SUPPRESSION", "WEEKLY_CAP", "OTHER")


def _sql(template: str) -> str:
    return template.format(fits=FITS, **TABLES, **STATES)


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
    with connection.cursor() as cursor:
        cursor.execute(_sql(WAIT_REDUCTION_SQL), params)
        for kind, group, entries, booked, waited, sooner, sooner_total in cursor.fetchall():
            groups[kind].append({
                "band" if kind == "band" else "quartile": group if kind == "band" else f"Q{group}",
                "entries": entries,
                "booked": booked,
                "waited_days_p50": _days(waited),
                "days_sooner_p50": _days(sooner),
                "days_sooner_per_entry": _days((sooner_total or 0) / entries) if entries else None,
            })
        cursor.execute(_sql(PASSOVER_SQL), params)
        reasons = {reason: {"passovers": 0, "entries": 0} for reason in PASSOVER_REASONS}
        for reason, count, entries in cursor.fetchall():
            reasons[reason] = {"passovers": count, "entries": entries}
        cursor.execute(_sql(FORGOTTEN_SQL), params)
        forgotten = [
            {"entry": ref, "patient": patient_ref, "priority_rank": rank,
             "waiting_since": iso_in_zone(since, clinic.timezone),
             "waiting_days": _days((now - since).total_seconds() / 86400), "eligible_vacancies": eligible}
            for ref, patient_ref, since, rank, eligible in cursor.fetchall()
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
