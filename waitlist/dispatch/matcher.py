"""The candidate matcher: bounded keyset pages over WAITING entries, hard eligibility in SQL.

No row locks are taken here: reading candidates is optimistic and reproducible; promotion
(``services.dispatch``) re-reads and re-checks the chosen entry under the vacancy fence.

Order: ``slot_fit DESC, asked_last ASC, priority_rank DESC, waiting_since ASC, entry_id ASC`` where

* ``slot_fit`` = 1 when the entry asked for the vacancy's practitioner by name, 0 when it accepts
  any practitioner (entries that asked for another practitioner are not eligible at all).
  Each slot_fit tier is one equality range of the ``wl_entry_match`` index
  (``practitioner_key = X``, or ``= 0`` for "any"), so tiers are read one after another.
* inside a tier the index order is ``(priority_key, waiting_since, id)`` with
  ``priority_key = -priority_rank`` (plus ``ASKED_LAST_OFFSET`` for an entry asked last: its patient left
  their last offers unanswered): one ascending row comparison ``(…) > (last row)`` seeks
  straight to the next page, so a page costs O(log n + page) in the size of the waitlist.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from scheduling.services.consent import provider_channels
from waitlist import queries
from waitlist.models import NON_BARRING_WITHDRAW_REASONS, DecisionStatus, Vacancy, WaitlistPolicy
from waitlist.reliability.feed import Decision, DecisionProvider, decisions_now
from waitlist.rules import eligibility

WEEK = timedelta(days=7)
logger = logging.getLogger("waitlist")

_START = (-(2**31), datetime(1, 1, 2, tzinfo=UTC), 0)
#: A tier's first page is read in two parts: its first ``PROBE_ROWS`` rows, then (only when no one of those was
#: promoted) the rest of the page, counted as the same page. Most dispatches promote one of the first few
#: candidates, and each row read costs its eligibility subqueries and a decision: a full first page of both
#: tiers was most of a dispatch's database time in the storm (benchmark 6).
PROBE_ROWS = 8
#: The page statements (``waitlist.queries``): both tiers' first pages in one, then one tier's page.
_TIERS = queries.TIERS
_FIRST_PAGES = queries.FIRST_PAGES_SQL


#: A patient without a decision: none, UNAVAILABLE.
_NO_DECISION: tuple[Decision | None, str] = (None, DecisionStatus.UNAVAILABLE)


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
    #: ``decision``'s status at the dispatch's ``now`` (``Decision.effective_status``; UNAVAILABLE: none).
    decision_status: str = DecisionStatus.UNAVAILABLE


@dataclass
class MatchStats:
    pages: int = 0
    candidates: int = 0
    exhausted: bool = False  # True when every eligible entry was seen (not cut by a budget)
    budget_hit: str = ""
    #: (entry id, entry ref, reason) of each candidate read but passed over (NO_CONTACT_CONSENT, PATIENT_OVERLAP).
    passed_over: list[tuple[int, str, str]] = field(default_factory=list)


def page_sql(slot_fit: int) -> str:
    return queries.page_sql(slot_fit)


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
        "tz": vacancy.clinic.timezone,
        "cap": policy.weekly_offer_cap,
        "week_ago": now - WEEK,
        "after_key": after[0],
        "after_since": after[1],
        "after_id": after[2],
        "limit": limit or policy.page_size,
    }


#: The time budget's clock. The simulator stops it (``sim.adapter.matcher_clock_stopped``): a budget of wall time
#: would make a run's fills depend on the machine's speed.
budget_clock: Callable[[], float] = time.perf_counter


def candidates(**kwargs) -> Iterator[Candidate]:
    """Yield eligible candidates in order, with their decision, within the policy's budgets (the arguments
    of ``candidate_pages``)."""
    for page in candidate_pages(**kwargs):
        yield from page


def candidate_pages(
    *,
    vacancy: Vacancy,
    policy: WaitlistPolicy,
    provider: DecisionProvider | None,
    now: datetime,
    stats: MatchStats | None = None,
    clock: Callable[[], float] | None = None,
) -> Iterator[list[Candidate]]:
    """Yield each page's eligible candidates in order, with their decision, within the policy's budgets.

    Decisions (``provider``'s; None: the installed provider's) are fetched once per page with their status now
    (one batch call: ``feed.decisions_now``), never per candidate; with ``provider`` None the page statement reads
    the stored ones with its rows (``queries.matcher_page``, ``decisions=True``), which are the installed provider's
    answer when it is the stored one. Pages, not single candidates: promotion locks the first free one of the rest
    of a page in one statement.
    """
    stats = stats if stats is not None else MatchStats()
    clock = clock or budget_clock
    # The time budget counts the matcher's own reads only: time the caller spends between candidates
    # (e.g. waiting on an entry lock another dispatcher holds) must not cut the list short.
    budget = policy.time_budget_ms / 1000
    spent = 0.0
    # The first statement reads the first page of both tiers (``_FIRST_PAGES``) and their decisions in one batch;
    # the second tier's first page is kept for when the first tier is done. Budgets count pages as before: the
    # kept page counts when it is used (cut to the candidates budget then), and is dropped if a budget ends first.
    kept: list[tuple] | None = None
    kept_decisions: dict[int, tuple[Decision, str]] = {}
    with_decisions = provider is None
    for slot_fit, _ in _TIERS:
        after = _START
        rest = 0  # rows of the tier's first page left after its probe: read next, not counted as a page
        while True:
            if not rest and stats.pages >= policy.max_pages:
                stats.budget_hit = "PAGES"
                return
            if spent > budget:
                stats.budget_hit = "TIME"
                return
            limit = min(rest or policy.page_size, policy.max_candidates - stats.candidates)
            if limit <= 0:
                stats.budget_hit = "CANDIDATES"
                return
            probe = after == _START
            read = min(limit, PROBE_ROWS) if probe else limit
            started = clock()
            decisions: dict[int, tuple[Decision, str]] | None = None
            if kept is not None and probe:
                rows, decisions, kept = kept[:read], kept_decisions, None
            else:
                params = page_params(vacancy=vacancy, policy=policy, now=now, after=after, limit=read)
                first = slot_fit == _TIERS[0][0] and after == _START
                rows = queries.matcher_page(params, first=first, slot_fit=slot_fit, decisions=with_decisions)
                if first:
                    tiers: dict[int, list[tuple]] = {fit: [] for fit, _ in _TIERS}
                    for row in rows:
                        tiers[row[0]].append(row[1:])
                    # Each tier in its page order, (priority_key, waiting_since, id): no reliance on UNION ALL's.
                    for tier in tiers.values():
                        tier.sort(key=lambda r: (r[6], r[5], r[0]))
                    rows, kept = tiers[slot_fit], tiers[_TIERS[1][0]]
                    kept_decisions = decisions_now(
                        provider, clinic=vacancy.clinic, patient_ids={r[2] for r in rows + kept}, now=now,
                        read_with_page=_read_with(rows + kept) if with_decisions else None,
                    ) if rows or kept else {}
                    decisions = kept_decisions
            if not rest:
                stats.pages += 1
            rest = limit - read if probe and len(rows) == read else 0
            if not rows:
                spent += clock() - started
                break
            if decisions is None:
                decisions = decisions_now(provider, clinic=vacancy.clinic, patient_ids={r[2] for r in rows}, now=now,
                                          read_with_page=_read_with(rows) if with_decisions else None)
            spent += clock() - started
            page = []
            for entry_id, ref, patient_id, version, rank, since, _key, pass_reason in (row[:8] for row in rows):
                stats.candidates += 1
                if pass_reason:
                    stats.passed_over.append((entry_id, ref, pass_reason))
                    logger.info("vacancy %s passes over %s: %s", vacancy.ref, ref, pass_reason)
                    continue
                decision, status = decisions.get(patient_id, _NO_DECISION)
                page.append(Candidate(
                    entry_id=entry_id,
                    entry_ref=ref,
                    patient_id=patient_id,
                    version=version,
                    slot_fit=slot_fit,
                    priority_rank=rank,
                    waiting_since=since,
                    decision=decision,
                    decision_status=status,
                ))
            if page:
                yield page
            last = rows[-1]
            after = (last[6], last[5], last[0])
            if len(rows) < read:
                break
    stats.exhausted = True


def _read_with(rows: list[tuple]) -> list[tuple]:
    """The stored decisions a page statement read with its rows: (patient id, ref, status, rank, expires_at)."""
    return [(row[2], *row[8:12]) for row in rows]


def ineligibility(*, entry, vacancy: Vacancy, policy: WaitlistPolicy, now: datetime, waived: tuple[str, ...] = ()
                  ) -> str | None:
    """The same hard eligibility as ``PAGE_SQL`` (both from ``eligibility.RULES``), for one entry as stored
    (promotion re-validation under the locks, staff review, the shadow's comparison): one query.

    Returns the first failed rule's reason code (``waived`` ones aside), or None when the entry may be offered
    this vacancy.
    """
    checks = queries.entry_checks(entry.pk, page_params(vacancy=vacancy, policy=policy, now=now))
    return eligibility.first_failed(checks, waived) if checks is not None else "ENTRY_NOT_WAITING"
