"""Promotion: the one way an offer is made (``promote``) or ended (``close_offer``), and the one candidate
loop (``offer_next``) that dispatch, staff review's SKIP and every cascade after a close run.

Nothing here opens a command of its own: the commands (``vacancy_dispatch``, ``vacancy_review_resolve``,
``offer_decline``/``expire``/``withdraw``, ``entry_withdraw``, ``vacancy_close``) own their transactions and
audit rows and call these under the fixed lock order (vacancy → offer → hold → entry). Every state change
is a locked compare-and-set (``cas_update``); a changed fact is an outcome (``RESTART``), not an exception.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Subquery
from psycopg.types.json import Jsonb

from common.cas import cas_conflict, cas_update, transition_sources
from common.errors import PatientOverlap, SlotOccupied
from common.models import OutboxMessage
from common.notify import CAP_SENDS_SQL, contact_cap_params
from common.prepared import PreparedQuery, prepared_cursor
from common.services import audit_record, outbox_message
from common.sql import insert_sql, saved
from scheduling import services as scheduling
from scheduling.models import Patient

from .. import eligibility, matcher
from ..decisions import Decision, get_decision_provider
from ..locks import OfferLocks, lock_vacancy
from ..models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    OFFER_TOPIC,
    DecisionGate,
    DecisionStatus,
    EntryStatus,
    NonFreshAction,
    Offer,
    OfferStatus,
    ShadowPolicy,
    ShadowStatus,
    Vacancy,
    VacancyStatus,
    WaitlistEntry,
    WaitlistPolicy,
)
from ..reachability import Unreachable, reachability
from ..windows import answer_deadline, unanswered_streak, window_rule
from ._shared import event_append, event_logged, note_record, notes_entry_locked, queue_dispatch, slot_of
from .policy import policy_current
from .shadow import shadow_observe, shadow_preview
from .standing import STANDING_NOTICE_SQL, release_deadline, standing_applies, standing_book

logger = logging.getLogger("waitlist")

OFFER_TEMPLATE = "waitlist_offer"

#: ``promote``'s outcome when the facts a candidate was chosen on changed (policy, decision): match again.
RESTART = "RESTART"
#: ``promote``'s outcome when the candidate cannot be reached now (contact cap): ``waiting`` says why.
UNREACHABLE = "UNREACHABLE"


@dataclass(frozen=True)
class DispatchResult:
    """``outcome``: OFFERED, BOOKED (a standing acceptance: offered and booked at once), ALREADY_OFFERED,
    NO_CANDIDATE, STAFF_REVIEW, DISABLED, CLOSED, or WAITING (nobody reachable now: ``waiting`` says why and until
    when; reconcile dispatches again)."""

    outcome: str
    offer: Offer | None = None
    stats: matcher.MatchStats | None = None
    waiting: Unreachable | None = None


class _NoDecisions:
    """The provider under ``decision_gate=NOT_USED``: no decision is read or applies."""

    def decisions_for(self, *, clinic, patient_ids) -> dict:
        return {}

    def fresh_read(self, *, clinic, patient_id):
        return None


NOT_USED_DECISION = Decision("", DecisionStatus.NOT_USED, 0, None)


def _active_offers(vacancy_id):
    return Offer.objects.filter(vacancy_id=vacancy_id, status__in=ACTIVE_OFFER_STATUSES)


def _active_offer(vacancy_id: int) -> Offer | None:
    return _active_offers(vacancy_id).first()


def with_active_offer(vacancies):
    """``vacancies`` annotated with ``active_offer_id`` (for ``settled``: one statement, not two)."""
    return vacancies.annotate(active_offer_id=Subquery(_active_offers(OuterRef("pk")).values("pk")[:1]))


def settled(vacancy: Vacancy, now: datetime, *, annotated: bool = False) -> DispatchResult | None:
    """Unlocked pre-check (the fence re-checks): a closed vacancy or one with an offer out. A started one
    without an offer is closed (``STARTED``) under its lock. ``annotated``: ``vacancy.active_offer_id`` was
    read with the vacancy (``with_active_offer``) and is trusted instead of asking again."""
    if annotated:
        active = Offer.objects.get(pk=vacancy.active_offer_id) if vacancy.active_offer_id else None
    else:
        active = _active_offer(vacancy.pk)
    if active is not None:
        return DispatchResult("ALREADY_OFFERED", active)
    if vacancy.status not in DISPATCHABLE_VACANCY_STATUSES:
        return DispatchResult("CLOSED")
    if vacancy.starts_at <= now:
        with transaction.atomic():
            locked = lock_vacancy(vacancy.pk)
            if locked.status in DISPATCHABLE_VACANCY_STATUSES and _active_offer(locked.pk) is None:
                cas_update(
                    locked, expected_status=locked.status, status=VacancyStatus.CLOSED, close_reason="STARTED"
                )
        return DispatchResult("CLOSED")
    return None


def offer_next(
    vacancy: Vacancy, *, now, actor_label: str, correlation_id: str, under_fence: bool = False,
    policy: WaitlistPolicy | None = None,
) -> DispatchResult:
    """The candidate loop: offer the vacancy to the best eligible, reachable candidate. Each candidate
    passed over is recorded (``DispatchNote``) with its reason, except the hard-ineligible ones the
    matcher's SQL never returns. ``RESTART`` means the policy or a decision changed meanwhile.

    ``under_fence`` (staff review's SKIP, which already holds the vacancy lock): a FRESH_READ policy is
    treated as staff review (no provider call under a lock) and entry locks are waited for.

    ``policy``: the clinic's policy as the caller read it (the dispatcher loop reads it once per clinic); every
    write made on it is fenced by the policy's id read under the vacancy lock (``RESTART`` when newer).
    """
    policy = policy or policy_current(clinic=vacancy.clinic)
    closed = reachability(policy=policy, clinic=vacancy.clinic, now=now)
    if closed is not None:  # quiet hours: no offer at all; the vacancy waits, nobody's chance is spent
        return _wait(vacancy, closed, now=now, correlation_id=correlation_id)
    gated = policy.decision_gate == DecisionGate.REQUIRED
    provider = get_decision_provider() if gated else _NoDecisions()
    stats = matcher.MatchStats()
    try:
        return _candidate_loop(
            vacancy, policy, provider, stats, now=now, actor_label=actor_label, correlation_id=correlation_id,
            under_fence=under_fence, gated=gated,
        )
    finally:
        # The matcher names candidates it passes over in SQL (no consent, an overlapping booking).
        for entry_id, _ref, reason in stats.passed_over:
            note_record(vacancy=vacancy, entry_id=entry_id, reason_code=reason, now=now,
                        correlation_id=correlation_id)


def _candidate_loop(
    vacancy: Vacancy, policy, provider, stats, *, now, actor_label: str, correlation_id: str, under_fence: bool,
    gated: bool,
) -> DispatchResult:
    passed: list[Unreachable] = []
    for page in matcher.candidate_pages(vacancy=vacancy, policy=policy, provider=provider, now=now, stats=stats):
        i = 0
        while i < len(page):
            candidate = page[i]
            decision = candidate.decision if gated else NOT_USED_DECISION
            if gated:
                status = decision.effective_status(now) if decision else DecisionStatus.UNAVAILABLE
                if status != DecisionStatus.FRESH:
                    action = policy.action_for(status)
                    if action == NonFreshAction.NEXT_CANDIDATE:
                        note_record(vacancy=vacancy, entry_id=candidate.entry_id, reason_code=f"DECISION_{status}",
                                    now=now, correlation_id=correlation_id)
                        i += 1
                        continue
                    if action == NonFreshAction.FRESH_READ and not under_fence:
                        # Outside any transaction: a provider may call out over the network.
                        decision = provider.fresh_read(clinic=vacancy.clinic, patient_id=candidate.patient_id)
                        status = decision.effective_status(now) if decision else DecisionStatus.UNAVAILABLE
                    if status != DecisionStatus.FRESH:
                        # STAFF_REVIEW, or a fresh read that is still not FRESH: never finalize automatically.
                        return _to_review(vacancy, candidate, status, policy, now=now,
                                          correlation_id=correlation_id)
            run = [(candidate, decision)]
            if not under_fence:
                # With the following candidates promotable as they are (no decision step first): promotion
                # locks the first of them no racing dispatcher holds, in one statement.
                run += _promotable_run(page[i + 1:], gated=gated, now=now)
            result, used = _promote(
                vacancy, run, policy, now=now, actor_label=actor_label, correlation_id=correlation_id,
                wait_for_entry=under_fence,
            )
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
    active = _offer_or_mark_exhausted(vacancy, now, mark=not stats.budget_hit)
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


def _offer_or_mark_exhausted(vacancy: Vacancy, now: datetime, *, mark: bool) -> Offer | None:
    """Under the vacancy lock: the active offer if one landed meanwhile, else record (once) that the
    list ran out for this vacancy (the "exhausted" fill metric)."""
    with transaction.atomic():
        locked = lock_vacancy(vacancy.pk)
        active = _active_offer(locked.pk)
        if active is None and mark and locked.exhausted_at is None and (
            locked.status in DISPATCHABLE_VACANCY_STATUSES
        ):
            # A marker, not a state: no version bump, so in-flight CAS writers are not disturbed.
            Vacancy.objects.filter(pk=locked.pk).update(exhausted_at=now)
    return active


def _fence_queryset(vacancy_id: int):
    """The fence's statement (``_fenced``): the vacancy locked, with its parents, its active offer, the clinic's
    newest policy and whether a shadow policy is published."""
    newest_policy = WaitlistPolicy.objects.filter(clinic_id=OuterRef("clinic_id")).order_by("-version")
    shadow = ShadowPolicy.objects.filter(clinic_id=OuterRef("clinic_id"), status=ShadowStatus.SHADOW)
    return (
        with_active_offer(Vacancy.objects.select_for_update(of=("self",), no_key=True))
        .select_related("clinic", "tenant_group", "resource")
        .annotate(
            policy_id_now=Subquery(newest_policy.values("pk")[:1]),
            has_shadow=Exists(shadow),
        )
        .filter(pk=vacancy_id)
    )


#: Compiled once per process, prepared once per connection (issue 15): the same statement, without compiling
#: or planning it per promotion.
_FENCE: PreparedQuery[Vacancy] = PreparedQuery(_fence_queryset, int)


def _fenced(vacancy: Vacancy, now: datetime) -> tuple[Vacancy, DispatchResult | None]:
    """Lock the vacancy (the fence: promoters of one vacancy queue here) and say whether it is still open
    for an offer: ALREADY_OFFERED (one landed meanwhile) or CLOSED (closed or started) when not.

    One statement locks the row and reads its active offer, the clinic's newest policy and whether a shadow
    policy is published. Those reads see the statement's snapshot, taken before any wait for the lock; the
    locked row itself is the newest. Every promotion bumps the vacancy's version, so a version other than
    the one ``vacancy`` was read at means an offer may have landed while this waited: then the active offer
    and the policy are read again, after the lock.
    """
    locked = _FENCE.first(vacancy.pk)
    if locked is None:
        raise Vacancy.DoesNotExist("Vacancy matching query does not exist.")
    if locked.version != vacancy.version:
        active = _active_offer(locked.pk)
        locked.active_offer_id = active.pk if active else None
        locked.policy_id_now = WaitlistPolicy.objects.filter(clinic_id=locked.clinic_id).order_by(
            "-version").values_list("pk", flat=True).first()
    if locked.active_offer_id is not None:
        return locked, DispatchResult("ALREADY_OFFERED", Offer.objects.get(pk=locked.active_offer_id))
    if locked.status not in DISPATCHABLE_VACANCY_STATUSES or locked.starts_at <= now:
        return locked, DispatchResult("CLOSED")
    return locked, None


# The entry's columns as stored (every concrete field), then its patient's columns the offer's notice needs.
_ENTRY_FIELDS = list(WaitlistEntry._meta.concrete_fields)
# (In the model's field order: ``from_db`` fills a partial row in that order.)
_PATIENT_FIELDS = tuple(f.attname for f in Patient._meta.concrete_fields
                        if f.attname in ("id", "ref", "language", "phone", "email"))

# The first entry of the run (in the run's order) still WAITING at the version it was read at that this
# transaction can lock now (SKIP LOCKED: another dispatcher holds it; or, with ``wait``, its lock waited for),
# then, over the locked row only (the CTE is materialized: computed after the lock, never for the rows
# passed over): its patient, and every hard-eligibility rule (``eligibility.checks_sql``) when asked.
_LOCK_FIRST_FREE_SQL = """
WITH locked AS MATERIALIZED (
    SELECT e.*, r.pos
    FROM unnest(%(ids)s::bigint[], %(versions)s::bigint[]) WITH ORDINALITY AS r(id, version, pos)
    JOIN waitlist_waitlistentry e ON e.id = r.id AND e.version = r.version
    WHERE e.status = 'WAITING'
    ORDER BY r.pos
    LIMIT 1
    FOR NO KEY UPDATE OF e{skip}
)
SELECT {entry}, e.pos, {standing}, {patient}, {sends}, {checks}
FROM locked e JOIN scheduling_patient p ON p.id = e.patient_id
"""


def _lock_first_free_sql(*, wait: bool, checks: bool) -> str:
    return _LOCK_FIRST_FREE_SQL.format(
        skip="" if wait else " SKIP LOCKED",
        entry=", ".join(f"e.{f.column}" for f in _ENTRY_FIELDS),
        standing=STANDING_NOTICE_SQL,
        patient=", ".join(f"p.{name}" for name in _PATIENT_FIELDS),
        checks=matcher.checks_column() if checks else "NULL",
        sends=CAP_SENDS_SQL.format(recipient="p.ref") if checks else "NULL",
    )


_LOCK_SQL = {(wait, checks): _lock_first_free_sql(wait=wait, checks=checks)
             for wait in (False, True) for checks in (False, True)}


def _lock_first_free(
    run: list[matcher.Candidate], *, wait: bool, recheck: tuple[Vacancy, WaitlistPolicy, datetime] | None = None,
) -> tuple[WaitlistEntry | None, int, _Rechecks | None]:
    """Lock (after the vacancy: the fixed order) the first entry of ``run`` that is still WAITING at the version
    it was read at and that no other transaction holds (``SKIP LOCKED``), with its patient (read, not locked)
    for the notice: one statement however many racing dispatchers hold the head of the queue. The entry carries
    ``standing_min_notice`` (its standing acceptance's minimum notice; None: it has none). Returns the
    entry (None: none free), how many of ``run`` that used up, and, with ``recheck`` (the locked vacancy, the
    policy and now), read in the same statement: the entry's hard-eligibility results (``matcher.checks_column``) and
    its patient's recent sends (for the contact cap, ``common.notify.CAP_SENDS_SQL``).
    ``wait``: one candidate, its lock waited for.
    """
    params: dict[str, Any] = {}
    checks = recheck is not None
    if recheck is not None:
        vacancy, policy, now = recheck
        params = {**matcher.page_params(vacancy=vacancy, policy=policy, now=now),
                  **contact_cap_params(policy.contact_cap_per_day, now)}
    params.update(ids=[c.entry_id for c in run], versions=[c.version for c in run])
    with prepared_cursor(connection) as cursor:
        cursor.execute(_LOCK_SQL[(wait, checks)], params)
        row = cursor.fetchone()
    if row is None:
        return None, len(run), None
    width = len(_ENTRY_FIELDS)
    entry = WaitlistEntry.from_db(connection.alias, [f.attname for f in _ENTRY_FIELDS], row[:width])
    entry.standing_min_notice = row[width + 1]
    patient = row[width + 2:width + 2 + len(_PATIENT_FIELDS)]
    entry.patient = Patient.from_db(connection.alias, list(_PATIENT_FIELDS), patient)
    return entry, row[width], _Rechecks(row[-1], row[-2]) if checks else None


@dataclass(frozen=True)
class _Rechecks:
    """What promotion re-checks of the entry it locked, read with the lock: every hard-eligibility rule's
    outcome and the patient's recent sends (the contact cap)."""

    checks: list[bool]
    sent: list[datetime]


def _to_review(vacancy: Vacancy, candidate: matcher.Candidate, status: str, policy: WaitlistPolicy, *, now,
               correlation_id):
    """Hand the vacancy to staff (REVIEW, this candidate) instead of promoting on a non-fresh decision; RESTART
    when ``policy`` (whose action chose review) is no longer the clinic's newest."""
    with transaction.atomic():
        locked, early = _fenced(vacancy, now)
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


def _offer_decision(decision: Decision | None, *, gated: bool, staff_reviewed: bool, now, expires_at) -> dict:
    """What the offer records of the decision it was made on. A staff-reviewed offer records the reviewed
    decision as it really is (``staff_reviewed`` stands in for freshness at claim time)."""
    if staff_reviewed:
        return {
            "decision_ref": decision.decision_ref if decision else "",
            "decision_status": decision.effective_status(now) if decision else DecisionStatus.UNAVAILABLE,
            "decision_priority_rank": decision.priority_rank if decision else 0,
            "decision_expires_at": decision.expires_at if decision else expires_at,
            "staff_reviewed": True,
        }
    if decision is None:
        raise ValueError("an automatic offer records the decision it was made on (NOT_USED when ungated)")
    return {
        "decision_ref": decision.decision_ref,
        "decision_status": DecisionStatus.FRESH if gated else DecisionStatus.NOT_USED,
        "decision_priority_rank": decision.priority_rank,
        "decision_expires_at": decision.expires_at,
        "staff_reviewed": False,
    }


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
    result, _used = _promote(
        vacancy, [(candidate, decision)], policy, now=now, actor_label=actor_label, correlation_id=correlation_id,
        wait_for_entry=wait_for_entry, staff_reviewed=staff_reviewed,
    )
    return result


def _promotable_run(rest: list[matcher.Candidate], *, gated: bool, now) -> list[tuple[matcher.Candidate, Any]]:
    """The candidates at the head of ``rest`` that need no decision step (ungated, or FRESH) before promotion."""
    run: list[tuple[matcher.Candidate, Any]] = []
    for candidate in rest:
        if not gated:
            run.append((candidate, NOT_USED_DECISION))
        elif candidate.decision and candidate.decision.effective_status(now) == DecisionStatus.FRESH:
            run.append((candidate, candidate.decision))
        else:
            break
    return run


@dataclass(frozen=True)
class _Attempt:
    """What every step of one promotion under the fence reads: the policy it runs under and who runs it."""

    policy: WaitlistPolicy
    now: datetime
    actor_label: str
    correlation_id: str
    staff_reviewed: bool


def _promote(
    vacancy: Vacancy,
    run: list[tuple[matcher.Candidate, Decision | None]],
    policy: WaitlistPolicy,
    *,
    now: datetime,
    actor_label: str,
    correlation_id: str,
    wait_for_entry: bool,
    staff_reviewed: bool = False,
) -> tuple[DispatchResult | None, int]:
    """``promote`` for the first of ``run`` (candidates in order) that no other transaction holds: the result
    and how many of ``run`` it used up (those passed over as held, and the one tried)."""
    attempt = _Attempt(policy, now, actor_label, correlation_id, staff_reviewed)
    used = 1
    try:
        with transaction.atomic():
            locked, early = _fenced(vacancy, now)
            if early is not None:
                return early, used
            if locked.policy_id_now != policy.pk:
                return DispatchResult(RESTART), used
            # The eligibility re-check is read with the lock when nothing was waited for (its snapshot is then
            # the lock's); after a wait it is read again below, in a snapshot taken after the lock.
            entry, used, rechecks = _lock_first_free(
                [c for c, _d in run], wait=wait_for_entry,
                recheck=None if wait_for_entry else (locked, policy, now),
            )
            if used > 1 or entry is None:
                # Other transactions hold the entries before it (promoting them for other vacancies right
                # now): pass over them, and say so, so "why was this candidate next" has an answer.
                held = [(c.entry_id, c.version) for c, _d in run[:used - (entry is not None)]]
                notes_entry_locked(vacancy=locked, entries=held, now=now, correlation_id=correlation_id)
            if entry is None:
                return None, used
            candidate, decision = run[used - 1]
            return _promote_locked(locked, entry, candidate, decision, rechecks, attempt), used
    except IntegrityError:
        # Backstop: the partial unique index refused a second active offer. Read what won.
        active = _active_offer(vacancy.pk)
        if active is None:
            raise
        return DispatchResult("ALREADY_OFFERED", active), used


def _promote_locked(locked: Vacancy, entry: WaitlistEntry, candidate: matcher.Candidate, decision: Decision | None,
                    rechecks: _Rechecks | None, a: _Attempt) -> DispatchResult | None:
    """Under the fence and the entry's lock: re-validate the candidate, hold the slot, write the offer (and book it
    at once on a standing acceptance). None: this candidate is no longer eligible (try the next one)."""
    policy, now = a.policy, a.now
    gated = policy.decision_gate == DecisionGate.REQUIRED
    stale = decision is None or decision.effective_status(now) != DecisionStatus.FRESH
    if gated and not a.staff_reviewed and stale:
        return DispatchResult(RESTART)
    reason = (
        eligibility.first_failed(rechecks.checks) if rechecks is not None
        else matcher.ineligibility(entry=entry, vacancy=locked, policy=policy, now=now)
    )
    if reason is not None:
        logger.info("vacancy %s: %s no longer eligible (%s)", locked.ref, entry.ref, reason)
        return None
    standing = not a.staff_reviewed and standing_applies(policy, entry.standing_min_notice,
                                                         starts_at=locked.starts_at, now=now)
    if not a.staff_reviewed and not standing:
        # Checked once the entry is ours (not before): a racer that finds the entry locked or taken moves on
        # without reading the patient's notices first. A standing booking needs no answer: its notice waits in
        # the outbox for quiet hours and the daily cap like any other.
        unreachable = reachability(policy=policy, clinic=locked.clinic, now=now, patient_ref=entry.patient.ref,
                                   sent=rechecks.sent if rechecks is not None else None)
        if unreachable is not None:
            note_record(vacancy=locked, entry_id=entry.pk, reason_code=unreachable.reason, until=unreachable.until,
                        now=now, correlation_id=a.correlation_id)
            return DispatchResult(UNREACHABLE, waiting=unreachable)
    unanswered = 0 if standing else unanswered_streak(policy, entry.pk)
    rule = window_rule(policy, locked.clinic.timezone, unanswered=unanswered)
    expires_at = answer_deadline(rule, start=now, slot_starts_at=locked.starts_at)
    shadow = shadow_preview(vacancy=locked, entry=entry, policy=policy, now=now) if locked.has_shadow else None
    hold, refused = _place_hold(locked, entry, expires_at)
    if hold is None:
        return refused
    shadow_observe(preview=shadow, correlation_id=a.correlation_id)
    offer = _new_offer(locked, entry, candidate, decision, hold, a, expires_at=expires_at, standing=standing,
                       gated=gated)
    _offer_write(locked, offer, entry, candidate, _offer_detail(offer, candidate, a), actor_label=a.actor_label,
                 correlation_id=a.correlation_id, now=now, notice=not standing)
    if standing:
        standing_book(locked, offer, entry, actor=a.actor_label, correlation_id=a.correlation_id, now=now)
        return DispatchResult("BOOKED", offer)
    return DispatchResult("OFFERED", offer)


def _place_hold(locked: Vacancy, entry: WaitlistEntry, expires_at: datetime):
    """``(hold, None)``, or ``(None, result)`` when the slot cannot be held for this patient: None (the patient
    booked or was offered an overlapping time meanwhile: next candidate) or CLOSED (someone booked the time
    directly: the exclusion constraint says the slot is gone, and the vacancy closes)."""
    try:
        return scheduling.hold_place(clinic=locked.clinic, patient_id=entry.patient_id, expires_at=expires_at,
                                     **slot_of(locked)), None
    except PatientOverlap:
        logger.info("vacancy %s: %s passed over (PATIENT_OVERLAP)", locked.ref, entry.ref)
        return None, None
    except SlotOccupied:
        cas_update(locked, expected_status=locked.status, status=VacancyStatus.CLOSED, close_reason="SLOT_TAKEN")
        return None, DispatchResult("CLOSED")


def _new_offer(locked: Vacancy, entry: WaitlistEntry, candidate: matcher.Candidate, decision: Decision | None, hold,
               a: _Attempt, *, expires_at: datetime, standing: bool, gated: bool) -> Offer:
    """The offer row (not yet written): the policy version and digest it runs under and the decision it rests on."""
    policy, now = a.policy, a.now
    return Offer(
        clinic_id=locked.clinic_id,
        tenant_group_id=locked.tenant_group_id,
        vacancy=locked,
        entry=entry,
        patient_id=entry.patient_id,
        hold=hold,
        expires_at=expires_at,
        policy=policy,
        policy_version=policy.version,
        policy_digest=policy.digest(),
        slot_fit=candidate.slot_fit,
        correlation_id=a.correlation_id,
        created_at=now,
        standing=standing,
        release_until=release_deadline(policy, booked_at=now, starts_at=locked.starts_at) if standing else None,
        **_offer_decision(decision, gated=gated, staff_reviewed=a.staff_reviewed, now=now, expires_at=expires_at),
    )


def _offer_detail(offer: Offer, candidate: matcher.Candidate, a: _Attempt) -> dict:
    """The MATCHED event's detail: refs, the policy version and digest, the decision (refs and codes only)."""
    return {
        "vacancy": offer.vacancy.ref,
        "entry": offer.entry.ref,
        "hold": offer.hold.ref,
        "slot_fit": candidate.slot_fit,
        "policy_version": a.policy.version,
        "policy_digest": offer.policy_digest,
        "decision_ref": offer.decision_ref,
        "decision_status": offer.decision_status,
        "decision_expires_at": offer.decision_expires_at.isoformat() if offer.decision_expires_at else None,
        **({"staff_reviewed": True} if a.staff_reviewed else {}),
        **({"standing": True} if offer.standing else {}),
    }


# A new offer's writes, in one statement: the entry's and the vacancy's compare-and-set (sources from the state
# tables; the entry at the version it was matched at, the vacancy at the version locked), the offer, its creation
# event and its notice in the outbox. A CAS that changes no row rolls the whole statement back (its caller's
# transaction raises the typed conflict), exactly as if each had been written alone.
_OFFER_WRITE_SQL = """
WITH entry AS (
    UPDATE waitlist_waitlistentry SET version = version + 1, status = %s
    WHERE id = %s AND version = %s AND status = ANY(%s) RETURNING id
), vacancy AS (
    UPDATE waitlist_vacancy SET version = version + 1, status = %s, review_entry_id = NULL, waiting_reason = '',
        waiting_until = NULL
    WHERE id = %s AND version = %s AND status = ANY(%s) RETURNING id
), offer AS (
    {offer} RETURNING id
), event AS (
    INSERT INTO waitlist_offerevent
        (clinic_id, offer_id, from_status, to_status, reason_code, actor, correlation_id, detail, created_at)
    SELECT %s, offer.id, %s, %s, %s, %s, %s, %s, %s FROM offer
), notice AS (
    {notice}
)
SELECT (SELECT id FROM offer), (SELECT count(*) FROM entry), (SELECT count(*) FROM vacancy)
"""


def _offer_write(vacancy: Vacancy, offer: Offer, entry: WaitlistEntry, candidate: matcher.Candidate, detail: dict,
                 *, actor_label: str, correlation_id: str, now: datetime, notice: bool = True) -> None:
    """Under the locks: entry WAITING → OFFERED and the vacancy's version bump (OPEN, no review, not waiting),
    the offer, its MATCHED event and its notice, in one statement (``_OFFER_WRITE_SQL``). ``notice=False``: a
    standing booking, whose notice is the booking's, not the offer's."""
    entry_sources = transition_sources(WaitlistEntry, EntryStatus.OFFERED, EntryStatus.WAITING)
    vacancy_sources = transition_sources(Vacancy, VacancyStatus.OPEN, vacancy.status)
    offer_sql, offer_params = insert_sql(offer)
    notice_sql, notice_params = (
        insert_sql(_notice(vacancy, offer, entry, offer.hold, correlation_id=correlation_id)) if notice
        else ("SELECT 1", []))
    event_correlation = correlation_id or offer.correlation_id
    params = [
        EntryStatus.OFFERED, entry.pk, candidate.version, entry_sources,
        VacancyStatus.OPEN, vacancy.pk, vacancy.version, vacancy_sources,
        *offer_params,
        offer.clinic_id, "", OfferStatus.OFFERED, "MATCHED", actor_label, event_correlation, Jsonb(detail), now,
        *notice_params,
    ]
    with prepared_cursor(connection) as cursor:
        cursor.execute(_OFFER_WRITE_SQL.format(offer=offer_sql, notice=notice_sql), params)
        offer_id, entries, vacancies = cursor.fetchone()
    if entries != 1:
        raise cas_conflict(WaitlistEntry, entry.pk, version=candidate.version, sources=entry_sources)
    if vacancies != 1:
        raise cas_conflict(Vacancy, vacancy.pk, version=vacancy.version, sources=vacancy_sources)
    saved(offer, offer_id)
    entry.status, entry.version = EntryStatus.OFFERED, candidate.version + 1
    vacancy.status, vacancy.version = VacancyStatus.OPEN, vacancy.version + 1
    vacancy.review_entry, vacancy.waiting_reason, vacancy.waiting_until = None, "", None
    event_logged(offer=offer, from_status="", to_status=OfferStatus.OFFERED, reason_code="MATCHED",
                 actor=actor_label, correlation_id=event_correlation)


def _notice(vacancy: Vacancy, offer: Offer, entry, hold, *, correlation_id: str) -> OutboxMessage:
    """The offer's notice for the outbox (written in the offer's statement; delivered after commit)."""
    patient = entry.patient
    return outbox_message(
        topic=OFFER_TOPIC,
        tenant_group_ref=vacancy.tenant_group.ref,
        clinic_ref=vacancy.clinic.ref,
        aggregate_ref=offer.ref,
        payload={
            "offer": offer.ref,
            "vacancy": vacancy.ref,
            "entry": entry.ref,
            "patient": patient.ref,
            "hold": hold.ref,
            "expires_at": offer.expires_at.isoformat(),
            "template": OFFER_TEMPLATE,
            "language": patient.language,
        },
        # Which channel, not the contact: the delivery worker resolves it at send time.
        channel="sms" if patient.phone else ("email" if patient.email else "none"),
        correlation_id=correlation_id,
        recipient_ref=patient.ref,
    )


def _reopen_entry(locks: OfferLocks, *, suppressed_until: datetime | None = None, similar_only: bool = False) -> None:
    entry = locks.entry
    if entry.status in (EntryStatus.OFFERED, EntryStatus.ACCEPTED):
        changes: dict[str, Any] = {"status": EntryStatus.WAITING}
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
        _reopen_entry(locks, suppressed_until=suppressed_until, similar_only=similar_only)
    event_append(
        offer=offer,
        from_status=previous,
        to_status=to_status,
        reason_code=reason_code,
        actor=actor,
        correlation_id=correlation_id,
        now=now,
        detail=detail,
    )
    if locks.vacancy.status in DISPATCHABLE_VACANCY_STATUSES and locks.vacancy.starts_at > now:
        queue_dispatch(locks.vacancy.pk)
    return offer
