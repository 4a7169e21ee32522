"""Promotion: the one way an offer is made (``promote``) or ended (``close_offer``), and the one candidate
loop (``offer_next``) that dispatch, staff review's SKIP and every cascade after a close run.

Nothing here opens a command of its own: the commands (``vacancy_dispatch``, ``vacancy_review_resolve``,
``offer_decline``/``expire``/``withdraw``, ``entry_withdraw``, ``vacancy_close``) own their transactions and
audit rows and call these under the fixed lock order (vacancy → offer → hold → entry). Every state change
is a locked compare-and-set (``cas_update``); a changed fact is an outcome (``RESTART``), not an exception.

A cancellation's path to its offer, top-down: ``vacancies.appointment_cancel_with_vacancy`` queues the dispatch,
``vacancies._dispatch`` (its context read once: ``context.dispatch_context``, the flag, the policy, the quiet hours)
→ ``offer_next`` → ``_candidate_loop`` (pages of candidates, decisions)
→ ``offer_write.promote_first_free``: under the fence (``fence.fenced``, the vacancy's lock), the entry locked with what
the decision needs (read), the offer's terms (``rules.terms.offer_terms``: decide), then the hold and one statement for
the offer, its event and its notice (write).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, cast

from django.db import transaction

from common.cas import cas_update
from common.services import audit_record
from scheduling import services as scheduling
from waitlist.dispatch import matcher
from waitlist.dispatch.context import DispatchContext, policy_context
from waitlist.dispatch.fence import (
    RESTART,
    UNREACHABLE,
    DispatchResult,
    active_or_exhausted,
    fenced,
)
from waitlist.dispatch.locks import OfferLocks
from waitlist.dispatch.offer_write import Attempt, promote_first_free
from waitlist.effects import event_append, note_record, queue_dispatch
from waitlist.models import (
    DISPATCHABLE_VACANCY_STATUSES,
    DecisionGate,
    DecisionStatus,
    EntryStatus,
    NonFreshAction,
    Offer,
    OfferStatus,
    Vacancy,
    VacancyStatus,
    WaitlistPolicy,
)
from waitlist.policy.services import policy_current
from waitlist.reliability.feed import Decision, get_decision_provider
from waitlist.rules.reachability import Unreachable
from waitlist.rules.windows import unanswered_count

logger = logging.getLogger("waitlist")

__all__ = ["RESTART", "UNREACHABLE", "DispatchResult", "close_offer", "offer_next", "promote"]


class _NoDecisions:
    """The provider under ``decision_gate=NOT_USED``: no decision is read or applies."""

    def decisions_for(self, *, clinic, patient_ids) -> dict:
        return {}

    def fresh_read(self, *, clinic, patient_id):
        return None


NOT_USED_DECISION = Decision("", DecisionStatus.NOT_USED, 0, None)


def offer_next(
    vacancy: Vacancy, *, now=None, actor_label: str = "", correlation_id: str = "", under_fence: bool = False,
    policy: WaitlistPolicy | None = None, context: DispatchContext | None = None,
) -> DispatchResult:
    """The candidate loop: offer the vacancy to the best eligible, reachable candidate. Each candidate
    passed over is recorded (``DispatchNote``) with its reason, except the hard-ineligible ones the
    matcher's SQL never returns. ``RESTART`` means the policy or a decision changed meanwhile.

    ``context``: what dispatch read once before (``context.dispatch_context``: the policy, the quiet
    hours now, the contact cap's parameters); without it (staff review's SKIP) it is read here from ``policy`` (or
    the clinic's newest), ``now``, ``actor_label`` and ``correlation_id``.

    ``under_fence`` (staff review's SKIP, which already holds the vacancy lock): a FRESH_READ policy is
    treated as staff review (no provider call under a lock) and entry locks are waited for.

    Every write made on the context's policy is fenced by the policy's id read under the vacancy lock (``RESTART``
    when newer).
    """
    ctx = context or policy_context(vacancy, now=now, actor_label=actor_label, correlation_id=correlation_id,
                                    policy=policy)
    now, correlation_id = ctx.now, ctx.correlation_id
    policy = cast(WaitlistPolicy, ctx.policy)
    if ctx.quiet is not None:  # quiet hours: no offer at all; the vacancy waits, nobody's chance is spent
        return _wait(vacancy, ctx.quiet, now=now, correlation_id=correlation_id)
    gated = policy.decision_gate == DecisionGate.REQUIRED
    stats = matcher.MatchStats()
    try:
        return _candidate_loop(vacancy, ctx, stats, under_fence=under_fence, gated=gated)
    finally:
        # The matcher names candidates it passes over in SQL (no consent, an overlapping booking).
        for entry_id, _ref, reason in stats.passed_over:
            note_record(vacancy=vacancy, entry_id=entry_id, reason_code=reason, now=now,
                        correlation_id=correlation_id)


def _candidate_loop(vacancy: Vacancy, ctx: DispatchContext, stats, *, under_fence: bool, gated: bool
                    ) -> DispatchResult:
    policy, now, correlation_id = cast(WaitlistPolicy, ctx.policy), ctx.now, ctx.correlation_id
    passed: list[Unreachable] = []
    attempt = Attempt(policy, now, ctx.actor_label, correlation_id, staff_reviewed=False,
                      cap_params=ctx.cap_params, slot=ctx.slot)
    # Gated: the installed provider's decisions, each with its status now (``feed.decisions_now``); else none.
    provider: Any = None if gated else _NoDecisions()
    for page in matcher.candidate_pages(vacancy=vacancy, policy=policy, provider=provider, now=now, stats=stats):
        i = 0
        while i < len(page):
            candidate = page[i]
            decision = candidate.decision if gated else NOT_USED_DECISION
            if gated:
                status = candidate.decision_status
                if status != DecisionStatus.FRESH:
                    action = policy.action_for(status)
                    if action == NonFreshAction.NEXT_CANDIDATE:
                        note_record(vacancy=vacancy, entry_id=candidate.entry_id, reason_code=f"DECISION_{status}",
                                    now=now, correlation_id=correlation_id)
                        i += 1
                        continue
                    if action == NonFreshAction.FRESH_READ and not under_fence:
                        # Outside any transaction: a provider may call out over the network.
                        decision = get_decision_provider().fresh_read(clinic=vacancy.clinic,
                                                                      patient_id=candidate.patient_id)
                        status = decision.effective_status(now) if decision else DecisionStatus.UNAVAILABLE
                    if status != DecisionStatus.FRESH:
                        # STAFF_REVIEW, or a fresh read that is still not FRESH: never finalize automatically.
                        return _to_review(vacancy, candidate, status, policy, now=now,
                                          correlation_id=correlation_id)
            run = [(candidate, decision)]
            if not under_fence:
                # With the following candidates promotable as they are (no decision step first): promotion
                # locks the first of them no racing dispatcher holds, in one statement.
                run += _promotable_run(page[i + 1:], gated=gated)
            result, used = promote_first_free(vacancy, run, attempt, wait_for_entry=under_fence)
            i += used
            if result is not None and result.outcome == UNREACHABLE:
                passed.append(cast(Unreachable, result.waiting))  # noted; the entry keeps its place
                continue
            if result is not None:
                return DispatchResult(result.outcome, result.offer, stats)
    if passed:
        # Someone eligible exists but cannot be reached yet: wait for the earliest of them.
        soonest = min(passed, key=lambda u: u.until or now)
        return _wait(vacancy, soonest, now=now, correlation_id=correlation_id, stats=stats)
    # A concurrent dispatcher may have offered this vacancy while the list was read (its candidate then
    # looks taken): that is ALREADY_OFFERED, not an empty list. Only a list read to its end is
    # exhausted; a budget cut leaves the vacancy to reconcile.
    active = active_or_exhausted(vacancy, now, mark=not stats.budget_hit)
    if active is not None:
        return DispatchResult("ALREADY_OFFERED", active, stats)
    logger.info(
        "vacancy %s: no candidate (pages=%s candidates=%s budget=%s)",
        vacancy.ref,
        stats.pages,
        stats.candidates,
        stats.budget_hit or "-",
    )
    return DispatchResult("NO_CANDIDATE", None, stats)


def _wait(
    vacancy: Vacancy, why: Unreachable, *, now, correlation_id: str, stats: matcher.MatchStats | None = None
) -> DispatchResult:
    """Show the vacancy as waiting (reason, until) without a version bump, and note it once per reason.

    Reconcile dispatches OPEN vacancies without an offer every run, so dispatch resumes by itself
    once the window opens, if the slot still has lead time (a started vacancy is closed instead).
    """
    if vacancy.waiting_reason != why.reason or vacancy.waiting_until != why.until:
        Vacancy.objects.filter(pk=vacancy.pk).update(waiting_reason=why.reason, waiting_until=why.until)
        vacancy.waiting_reason, vacancy.waiting_until = why.reason, why.until
        if why.reason == "QUIET_HOURS":
            note_record(vacancy=vacancy, reason_code=why.reason, until=why.until, now=now,
                        correlation_id=correlation_id)
    logger.info("vacancy %s waits until %s: %s", vacancy.ref, why.until, why.reason)
    return DispatchResult("WAITING", None, stats, why)


def _to_review(vacancy: Vacancy, candidate: matcher.Candidate, status: str, policy: WaitlistPolicy, *, now,
               correlation_id):
    """Hand the vacancy to staff (REVIEW, this candidate) instead of promoting on a non-fresh decision; RESTART
    when ``policy`` (whose action chose review) is no longer the clinic's newest."""
    with transaction.atomic():
        locked, early = fenced(vacancy, now)
        if early is not None and early.outcome == "ALREADY_OFFERED":
            return early
        if locked.status not in DISPATCHABLE_VACANCY_STATUSES:
            return DispatchResult("CLOSED")
        if locked.policy_id_now != policy.pk:
            return DispatchResult(RESTART)
        if locked.status != VacancyStatus.REVIEW or locked.review_entry_id != candidate.entry_id:
            cas_update(locked, expected_status=locked.status, status=VacancyStatus.REVIEW,
                       review_entry_id=candidate.entry_id)
            audit_record(
                actor=None,
                action="waitlist.vacancy_review",
                clinic=locked.clinic,
                target_ref=locked.ref,
                reason=f"DECISION_{status}",
                correlation_id=correlation_id,
                result={"entry": candidate.entry_ref, "decision_status": status},
                system_label="dispatch",
            )
    return DispatchResult("STAFF_REVIEW")


def promote(
    vacancy: Vacancy,
    candidate: matcher.Candidate,
    decision: Decision | None,
    policy: WaitlistPolicy,
    *,
    now: datetime,
    actor_label: str,
    correlation_id: str,
    wait_for_entry: bool = True,
    staff_reviewed: bool = False,
) -> DispatchResult | None:
    """Under the vacancy fence: re-validate, then write offer + hold + entry + event + outbox.

    Returns None when this candidate is no longer eligible (try the next one), ``UNREACHABLE`` (noted) when
    the patient cannot be reached now (contact cap), ``RESTART`` when the policy or (unless ``staff_reviewed``)
    the decision changed. Automatic dispatch passes ``wait_for_entry=False``:
    an entry locked by another dispatcher is being promoted for another vacancy right now, so waiting on it
    would only queue every dispatcher behind one row. ``staff_reviewed`` (review PROMOTE): staff accepted
    ``decision`` as it is (None: no decision at all); the offer records it so.
    """
    attempt = Attempt(policy, now, actor_label, correlation_id, staff_reviewed)
    result, _used = promote_first_free(vacancy, [(candidate, decision)], attempt, wait_for_entry=wait_for_entry)
    return result


def _promotable_run(rest: list[matcher.Candidate], *, gated: bool) -> list[tuple[matcher.Candidate, Any]]:
    """The candidates at the head of ``rest`` that need no decision step (ungated, or FRESH) before promotion."""
    run: list[tuple[matcher.Candidate, Any]] = []
    for candidate in rest:
        if not gated:
            run.append((candidate, NOT_USED_DECISION))
        elif candidate.decision and candidate.decision_status == DecisionStatus.FRESH:
            run.append((candidate, candidate.decision))
        else:
            break
    return run


def _asked_last_after_close(locks: OfferLocks, *, now: datetime) -> datetime | None:
    """The entry's ``asked_last_since`` once its offer closed: set (kept from before) when this expiry makes the
    patient's last ``unanswered_ask_last_after`` offers (the clinic's policy now) all unanswered, as
    ``windows.unanswered_streak`` counts them; cleared by an answer (a decline, or an accept whose hold lapsed);
    else unchanged (a withdrawn offer or a standing booking says nothing of the patient)."""
    offer, since = locks.offer, locks.entry.asked_last_since
    if offer.status == OfferStatus.DECLINED or offer.reason_code == "HOLD_EXPIRED":
        return None
    if since is not None or offer.standing or offer.status != OfferStatus.EXPIRED or offer.reason_code != "EXPIRED":
        return since
    after = policy_current(clinic=locks.vacancy.clinic).unanswered_ask_last_after
    return now if after and unanswered_count(offer.entry_id, after) >= after else None


def _reopen_entry(locks: OfferLocks, *, suppressed_until: datetime | None = None, similar_only: bool = False,
                  now: datetime) -> None:
    entry = locks.entry
    if entry.status in (EntryStatus.OFFERED, EntryStatus.ACCEPTED):
        changes: dict[str, Any] = {"status": EntryStatus.WAITING}
        asked_last = _asked_last_after_close(locks, now=now)
        if asked_last != entry.asked_last_since:
            changes["asked_last_since"] = asked_last
        if suppressed_until is not None:
            # SIMILAR scope: only offers of this vacancy's practitioner and part of the day are held back.
            changes |= {"suppressed_until": suppressed_until,
                        "suppressed_practitioner_id": locks.vacancy.practitioner_id if similar_only else None,
                        "suppressed_like_start": locks.vacancy.starts_at if similar_only else None}
        cas_update(entry, expected_status=entry.status, **changes)


def close_offer(locks: OfferLocks, *, to_status: str, reason_code: str, actor: str, correlation_id: str, now: datetime,
                suppressed_until: datetime | None = None, similar_only: bool = False, detail: dict | None = None,
                reopen_entry: bool = True, **offer_changes) -> Offer:
    """End an active offer (decline, expire, withdraw, entry withdrawn, vacancy closed): offer CAS, hold
    released, entry back to WAITING (unless the caller ends the entry itself: ``reopen_entry=False``), one
    event, and the cascade to the next candidate queued for after commit while the vacancy is open."""
    offer = locks.offer
    previous = offer.status
    cas_update(offer, expected_status=previous, status=to_status, reason_code=reason_code, **offer_changes)
    scheduling.hold_release(hold=locks.hold, reason=reason_code)
    if reopen_entry:
        _reopen_entry(locks, suppressed_until=suppressed_until, similar_only=similar_only, now=now)
    event_append(offer=offer, from_status=previous, to_status=to_status, reason_code=reason_code, actor=actor,
                 correlation_id=correlation_id, now=now, detail=detail)
    if locks.vacancy.status in DISPATCHABLE_VACANCY_STATUSES and locks.vacancy.starts_at > now:
        queue_dispatch(locks.vacancy.pk)
    return offer
