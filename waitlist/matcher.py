"""The candidate matcher: bounded keyset pages over WAITING entries, hard eligibility in SQL.

No row locks are taken here: reading candidates is optimistic and reproducible; promotion
(``services.dispatch``) re-reads and re-checks the chosen entry under the vacancy fence.

Order: ``slot_fit DESC, priority_rank DESC, waiting_since ASC, entry_id ASC`` where

* ``slot_fit`` = 1 when the entry asked for the vacancy's practitioner by name, 0 when it accepts
  any practitioner (entries that asked for another practitioner are not eligible at all).
  Each slot_fit tier is one equality range of the ``wl_entry_match`` index
  (``practitioner_key = X``, or ``= 0`` for "any"), so tiers are read one after another.
* inside a tier the index order is ``(priority_key, waiting_since, id)`` with
  ``priority_key = -priority_rank``: one ascending row comparison ``(…) > (last row)`` seeks
  straight to the next page, so a page costs O(log n + page) in the size of the waitlist.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import connection

from scheduling.services.consent import consent_granted, provider_channels

from .decisions import Decision, DecisionProvider
from .models import NON_BARRING_WITHDRAW_REASONS, Vacancy, WaitlistPolicy

WEEK = timedelta(days=7)
logger = logging.getLogger("waitlist")

# Hard eligibility, all in SQL. The status literal matches the partial index's predicate. Two conditions are
# not filtered but named (``pass_reason``), so a passed-over candidate is recorded with its reason rather than
# silently missing: no consent for the clinic's channel, and a time overlapping the patient's own bookings.
PAGE_SQL = """
SELECT e.id, e.ref, e.patient_id, e.version, e.priority_rank, e.waiting_since,
  CASE
    WHEN NOT EXISTS (  -- the newest consent row of a channel the clinic's provider uses is GRANTED
        SELECT 1 FROM scheduling_contactconsent c
        WHERE c.patient_id = e.patient_id AND c.channel = ANY(%(channels)s) AND c.state = 'GRANTED'
          AND c.id = (SELECT max(n.id) FROM scheduling_contactconsent n
                      WHERE n.patient_id = c.patient_id AND n.channel = c.channel))
      THEN 'NO_CONTACT_CONSENT'
    WHEN EXISTS (  -- the patient's own holds and HELD/CONFIRMED appointments (the exclusion constraint's index)
        SELECT 1 FROM scheduling_capacityallocation a
        WHERE a.patient_id = e.patient_id AND a.active AND a.period && tstzrange(%(starts_at)s, %(ends_at)s, '[)'))
      THEN 'PATIENT_OVERLAP'
  END AS pass_reason
FROM waitlist_waitlistentry e
WHERE e.status = 'WAITING'
  AND e.clinic_id = %(clinic)s
  AND e.tenant_group_id = %(tenant)s
  AND e.treatment_id = %(treatment)s
  AND {practitioner}
  AND e.earliest <= %(starts_at)s AND e.latest >= %(ends_at)s
  AND (e.resource_kind = '' OR e.resource_kind = %(resource_kind)s)
  AND e.patient_id IS DISTINCT FROM %(excluded_patient)s
  AND (e.suppressed_until IS NULL OR e.suppressed_until <= %(now)s)
  AND NOT EXISTS (
      SELECT 1 FROM waitlist_offer o WHERE o.vacancy_id = %(vacancy)s AND o.entry_id = e.id
        AND NOT (o.status = 'WITHDRAWN' AND o.reason_code = ANY(%(non_barring)s)))
  AND NOT EXISTS (
      SELECT 1 FROM waitlist_vacancyskip k
      WHERE k.clinic_id = e.clinic_id AND k.vacancy_id = %(vacancy)s AND k.entry_id = e.id)
  AND (%(cap)s::integer IS NULL OR (
      SELECT count(*) FROM waitlist_offer w
      WHERE w.clinic_id = e.clinic_id AND w.patient_id = e.patient_id AND w.created_at > %(week_ago)s
  ) < %(cap)s::integer)
  AND (e.priority_key, e.waiting_since, e.id) > (%(after_key)s, %(after_since)s, %(after_id)s)
ORDER BY e.priority_key, e.waiting_since, e.id
LIMIT %(limit)s
"""

_TIERS = ((1, "e.practitioner_key = %(practitioner)s"), (0, "e.practitioner_key = 0"))
_START = (-(2**31), datetime(1, 1, 2, tzinfo=UTC), 0)


@dataclass(frozen=True)
class Candidate:
    entry_id: int
    entry_ref: str
    patient_id: int
    version: int
    slot_fit: int
    priority_rank: int
    waiting_since: datetime
    decision: Decision | None


@dataclass
class MatchStats:
    pages: int = 0
    candidates: int = 0
    exhausted: bool = False  # True when every eligible entry was seen (not cut by a budget)
    budget_hit: str = ""
    #: (entry id, entry ref, reason) of each candidate read but passed over (NO_CONTACT_CONSENT, PATIENT_OVERLAP).
    passed_over: list[tuple[int, str, str]] = field(default_factory=list)


def page_sql(slot_fit: int) -> str:
    return PAGE_SQL.format(practitioner=dict(_TIERS)[slot_fit])


def page_params(
    *, vacancy: Vacancy, policy: WaitlistPolicy, now: datetime, after=_START, limit: int | None = None
) -> dict:
    return {
        "clinic": vacancy.clinic_id,
        "tenant": vacancy.tenant_group_id,
        "treatment": vacancy.treatment_id,
        "practitioner": vacancy.practitioner_id,
        "starts_at": vacancy.starts_at,
        "ends_at": vacancy.ends_at,
        "resource_kind": vacancy.resource.kind if vacancy.resource else None,
        "excluded_patient": vacancy.excluded_patient_id,
        "channels": list(provider_channels(vacancy.clinic.settings)),
        "now": now,
        "vacancy": vacancy.pk,
        "non_barring": list(NON_BARRING_WITHDRAW_REASONS),
        "cap": policy.weekly_offer_cap,
        "week_ago": now - WEEK,
        "after_key": after[0],
        "after_since": after[1],
        "after_id": after[2],
        "limit": limit or policy.page_size,
    }


def candidates(
    *,
    vacancy: Vacancy,
    policy: WaitlistPolicy,
    provider: DecisionProvider,
    now: datetime,
    stats: MatchStats | None = None,
    clock=time.perf_counter,
) -> Iterator[Candidate]:
    """Yield eligible candidates in order, with their decision, within the policy's budgets.

    Decisions are fetched once per page (one batch call), never per candidate.
    """
    stats = stats if stats is not None else MatchStats()
    # The time budget counts the matcher's own reads only: time the caller spends between candidates
    # (e.g. waiting on an entry lock another dispatcher holds) must not cut the list short.
    budget = policy.time_budget_ms / 1000
    spent = 0.0
    for slot_fit, _ in _TIERS:
        after = _START
        while True:
            if stats.pages >= policy.max_pages:
                stats.budget_hit = "PAGES"
                return
            if spent > budget:
                stats.budget_hit = "TIME"
                return
            limit = min(policy.page_size, policy.max_candidates - stats.candidates)
            if limit <= 0:
                stats.budget_hit = "CANDIDATES"
                return
            started = clock()
            params = page_params(vacancy=vacancy, policy=policy, now=now, after=after, limit=limit)
            with connection.cursor() as cursor:
                cursor.execute(page_sql(slot_fit), params)
                rows = cursor.fetchall()
            stats.pages += 1
            if not rows:
                spent += clock() - started
                break
            decisions = provider.decisions_for(clinic=vacancy.clinic, patient_ids={r[2] for r in rows})
            spent += clock() - started
            for entry_id, ref, patient_id, version, rank, since, pass_reason in rows:
                stats.candidates += 1
                if pass_reason:
                    stats.passed_over.append((entry_id, ref, pass_reason))
                    logger.info("vacancy %s passes over %s: %s", vacancy.ref, ref, pass_reason)
                    continue
                yield Candidate(
                    entry_id=entry_id,
                    entry_ref=ref,
                    patient_id=patient_id,
                    version=version,
                    slot_fit=slot_fit,
                    priority_rank=rank,
                    waiting_since=since,
                    decision=decisions.get(patient_id),
                )
            last = rows[-1]
            after = (-last[4], last[5], last[0])
            if len(rows) < limit:
                break
    stats.exhausted = True


def ineligibility(*, entry, vacancy: Vacancy, policy: WaitlistPolicy, now: datetime) -> str | None:
    """The same hard eligibility as ``PAGE_SQL``, for one locked entry (promotion re-validation).

    Returns a reason code, or None when the entry may be offered this vacancy.
    """
    from scheduling.models import CapacityAllocation
    from scheduling.services.allocations import period

    from .models import EntryStatus, Offer, OfferStatus, VacancySkip  # local: keeps the module's import surface small

    if entry.status != EntryStatus.WAITING:
        return "ENTRY_NOT_WAITING"
    if entry.clinic_id != vacancy.clinic_id or entry.tenant_group_id != vacancy.tenant_group_id:
        return "SCOPE"
    if entry.treatment_id != vacancy.treatment_id:
        return "TREATMENT"
    if entry.practitioner_id not in (None, vacancy.practitioner_id):
        return "PRACTITIONER"
    if not (entry.earliest <= vacancy.starts_at and vacancy.ends_at <= entry.latest):
        return "WINDOW"
    if entry.resource_kind and (not vacancy.resource or vacancy.resource.kind != entry.resource_kind):
        return "RESOURCE"
    if entry.patient_id == vacancy.excluded_patient_id:
        return "CANCELLING_PATIENT"
    if entry.suppressed_until is not None and entry.suppressed_until > now:
        return "SUPPRESSED"
    if (
        Offer.objects.filter(vacancy_id=vacancy.pk, entry_id=entry.pk)
        .exclude(status=OfferStatus.WITHDRAWN, reason_code__in=NON_BARRING_WITHDRAW_REASONS)
        .exists()
    ):
        return "ALREADY_OFFERED"
    if VacancySkip.objects.filter(vacancy_id=vacancy.pk, entry_id=entry.pk).exists():
        return "SKIPPED_BY_STAFF"
    if not consent_granted(entry.patient_id, provider_channels(vacancy.clinic.settings)):
        return "NO_CONTACT_CONSENT"
    if CapacityAllocation.objects.filter(
        patient_id=entry.patient_id, active=True, period__overlap=period(vacancy.starts_at, vacancy.ends_at)
    ).exists():
        return "PATIENT_OVERLAP"
    if policy.weekly_offer_cap is not None:
        recent = Offer.objects.filter(
            clinic_id=entry.clinic_id, patient_id=entry.patient_id, created_at__gt=now - WEEK
        ).count()
        if recent >= policy.weekly_offer_cap:
            return "WEEKLY_CAP"
    return None
