"""An offer's terms, decided once in plain Python (issue 42): ``offer_terms``.

Promotion reads, under the vacancy's fence and the entry's lock, everything the decision needs in one statement
(``dispatch.fence.lock_first_free``: ``EntryFacts``), asks ``offer_terms`` what the offer is, and writes what
it answers. Whether the candidate may still be offered (the hard-eligibility rules' outcomes,
``eligibility.first_failed``), whether the patient's yes is already given (a standing acceptance that applies, or a
late accept), whether the patient can be reached now (``reachability``), how long they have to answer and until when
a standing booking may be released, and what the offer records of the decision it rests on: each rule is written
here once, and every path that makes an offer (dispatch, staff review's PROMOTE and SKIP, a late accept) asks this
one function. No database access.

**The answer window.** A fixed window gives a vacancy five days out the same minutes per patient as one in three
hours, so the cascade reaches few patients before the slot starts and a slow responder never gets the time to
answer. ``LEAD_TIME`` makes the window a share of the time left (between a floor and a ceiling) and always ends it
``margin`` before the slot starts. Under either rule time in which the patient cannot be reached (the clinic's
quiet hours) does not count: an offer made at 20:30 with a two-hour window runs into the next morning instead of
expiring overnight.

A patient whose last offers all went unanswered (their windows ran out with no reply) would spend the next vacancy's
whole window too, while patients who answer wait behind them: with ``answer_window_unanswered_minutes`` set, such a
patient (``answer_window_unanswered_after`` unanswered offers in a row) gets at most that many minutes. Any answer (a
decline, an accept) ends the run. The streak is read with the entry's lock (or alone: ``windows.unanswered_streak``,
at a notice's delivery).

**A standing acceptance** (a patient's advance yes, ``waitlist.standing``) books the candidate at once when the clinic
allows it and the slot starts at least the patient's minimum notice from now; the booking may be released until
``release_deadline``.

The simulator's modelled policies call the same window and release rules (``sim.windows``, ``sim.models``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from common.notify import quiet_hours_until
from waitlist.models import DecisionGate, DecisionStatus
from waitlist.reliability.feed import Decision
from waitlist.rules.eligibility import LATE_ACCEPT_WAIVED, first_failed
from waitlist.rules.reachability import Unreachable, reach_now

# --- the answer window ---------------------------------------------------------------------------------------------

FIXED = "FIXED"
LEAD_TIME = "LEAD_TIME"


@dataclass(frozen=True)
class WindowRule:
    """The answer-window fields of a policy version with the clinic's time zone and quiet hours."""

    kind: str  # FIXED or LEAD_TIME (``models.AnswerWindow``)
    fixed_minutes: int  # FIXED: the window (the policy's ``hold_minutes``)
    percent: int  # LEAD_TIME: share of the time left until the slot starts
    min_minutes: int  # LEAD_TIME: floor
    max_minutes: int  # LEAD_TIME: ceiling
    margin_minutes: int  # the window ends at least this long before the slot starts
    tz_name: str
    quiet_start: time | None = None
    quiet_end: time | None = None
    #: The longest window (minutes) of a patient whose recent offers went unanswered (None: no such limit).
    unanswered_minutes: int | None = None


def window_rule(policy, tz_name: str, *, unanswered: int = 0) -> WindowRule:
    """The rule of a ``WaitlistPolicy`` row (or anything with its field names) in clinic ``tz_name``, for a
    patient whose last ``unanswered`` offers went unanswered (``windows.unanswered_streak``)."""
    short = getattr(policy, "answer_window_unanswered_minutes", None)
    after = getattr(policy, "answer_window_unanswered_after", 0) or 0
    return WindowRule(
        kind=policy.answer_window,
        fixed_minutes=policy.hold_minutes,
        percent=policy.answer_window_percent,
        min_minutes=policy.answer_window_min_minutes,
        max_minutes=policy.answer_window_max_minutes,
        margin_minutes=policy.answer_window_margin_minutes,
        tz_name=tz_name,
        quiet_start=policy.quiet_hours_start,
        quiet_end=policy.quiet_hours_end,
        unanswered_minutes=short if short and after and unanswered >= after else None,
    )


def unanswered_limit(policy) -> int:
    """How many latest offers the streak looks at: the policy's ``answer_window_unanswered_after`` (0: none)."""
    after = getattr(policy, "answer_window_unanswered_after", 0) or 0
    return after if getattr(policy, "answer_window_unanswered_minutes", None) else 0


def window_length(rule: WindowRule, *, start: datetime, slot_starts_at: datetime) -> timedelta:
    """The reachable time the patient gets, before the slot's margin caps it."""
    if rule.kind == FIXED:
        length = timedelta(minutes=rule.fixed_minutes)
    else:
        share = (slot_starts_at - start) * (rule.percent / 100)
        length = min(max(share, timedelta(minutes=rule.min_minutes)), timedelta(minutes=rule.max_minutes))
    if rule.unanswered_minutes is not None:
        length = min(length, timedelta(minutes=rule.unanswered_minutes))
    return length


def answer_deadline(rule: WindowRule, *, start: datetime, slot_starts_at: datetime) -> datetime:
    """When an offer whose notice reaches the patient at ``start`` expires.

    ``window_length`` of reachable time counted from ``start`` (quiet hours skipped), ended no later than
    ``margin`` before the slot; a margin the time left cannot honour ends it at the slot's start instead.
    """
    end = _after_reachable(rule, start, window_length(rule, start=start, slot_starts_at=slot_starts_at))
    latest = slot_starts_at - timedelta(minutes=rule.margin_minutes)
    if latest <= start:
        latest = slot_starts_at
    return min(end, latest)


def _after_reachable(rule: WindowRule, start: datetime, length: timedelta) -> datetime:
    """``start`` plus ``length`` of time outside the quiet hours."""
    if rule.quiet_start is None or rule.quiet_end is None or rule.quiet_start == rule.quiet_end:
        return start + length
    zone = ZoneInfo(rule.tz_name)
    at, left = start, length
    for _ in range(400):  # a night per step: bounded however long the window
        resumes = quiet_hours_until(rule.quiet_start, rule.quiet_end, rule.tz_name, at)
        if resumes is not None:
            at = resumes
            continue
        local = at.astimezone(zone)
        quiet = datetime.combine(local.date(), rule.quiet_start, tzinfo=zone)
        if quiet <= local:
            quiet = datetime.combine(local.date() + timedelta(days=1), rule.quiet_start, tzinfo=zone)
        if at + left <= quiet:
            return at + left
        left -= quiet - at
        at = quiet
    return at + left


def late_acceptable(offer, vacancy, policy, now: datetime) -> str | None:
    """Why ``offer`` (its own patient's, as read) cannot be taken up late now (``services.offer_late_accept``),
    as a refusal code; None: it may be, if the vacancy's fence finds no other offer out. A yes that came after
    the window (it ended unanswered, or its deadline passed before the expiry job ran) still counts while the
    slot is more than the answer margin away, where the clinic's policy takes late answers. Read without locks
    by the claim page (to offer the time) and under them by the command."""
    if not policy.late_accept:
        return "LATE_ACCEPT_OFF"
    unanswered = (offer.status == "EXPIRED" and offer.reason_code == "EXPIRED") or (
        offer.status == "OFFERED" and now >= min(offer.expires_at, vacancy.starts_at))
    if not unanswered:
        return "OFFER_NOT_EXPIRED" if offer.status == "OFFERED" else "LATE_ACCEPT_NOT_APPLICABLE"
    if vacancy.starts_at - now <= timedelta(minutes=policy.answer_window_margin_minutes):
        return "SLOT_TOO_SOON"
    return None


# --- a standing acceptance -----------------------------------------------------------------------------------------

#: ``standing_outcome``'s answers: the candidate is booked at once (APPLIES), has no standing acceptance, or has
#: one that does not apply here (the clinic's policy has the feature off; the slot is inside their minimum notice).
APPLIES, NO_STANDING, POLICY_OFF, MIN_NOTICE = "APPLIES", "NO_STANDING", "POLICY_OFF", "MIN_NOTICE"


def standing_outcome(policy, min_notice_minutes: int | None, *, starts_at: datetime, now: datetime) -> str:
    """The one rule of automatic booking, with its reason: APPLIES when the entry's standing acceptance is
    GRANTED (``min_notice_minutes`` not None), the clinic allows it and the slot starts at least that notice from
    now; else why not (NO_STANDING, POLICY_OFF, MIN_NOTICE)."""
    if min_notice_minutes is None:
        return NO_STANDING
    if not policy.standing_acceptance:
        return POLICY_OFF
    if starts_at - now < timedelta(minutes=min_notice_minutes):
        return MIN_NOTICE
    return APPLIES


def release_deadline(policy, *, booked_at: datetime, starts_at: datetime) -> datetime:
    """Until when a standing booking may be released: ``standing_release_minutes`` after it was made, and never
    so late that the reopened slot has less lead than a vacancy needs (``min_lead_minutes``, the answer margin)."""
    lead = timedelta(minutes=max(policy.min_lead_minutes, policy.answer_window_margin_minutes))
    return max(booked_at, min(booked_at + timedelta(minutes=policy.standing_release_minutes), starts_at - lead))


# --- the decision an offer rests on --------------------------------------------------------------------------------

def offer_decision(decision: Decision | None, *, gated: bool, staff_reviewed: bool, now: datetime,
                   expires_at: datetime) -> dict:
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


# --- the offer's terms ---------------------------------------------------------------------------------------------

#: ``OfferTerms.outcome``: an offer whose notice asks the patient (OFFER), one booked at once on a standing
#: acceptance (BOOK), a renewed offer whose yes is given (ANSWERED: a late accept), or why there is none.
OFFER, BOOK, ANSWERED = "OFFER", "BOOK", "ANSWERED"
#: No offer: the candidate's decision is no longer FRESH (RESTART: match again), a hard rule fails now (INELIGIBLE,
#: ``reason``: its code; try the next candidate), or the patient cannot be reached now (UNREACHABLE, ``unreachable``).
RESTART, INELIGIBLE, UNREACHABLE = "RESTART", "INELIGIBLE", "UNREACHABLE"


@dataclass(frozen=True)
class EntryFacts:
    """What promotion read of the entry it locked, for ``offer_terms``: every hard-eligibility rule's outcome (in
    ``eligibility.RULES`` order), the patient's recent sends (the contact cap), how many of the entry's latest
    offers went unanswered in a row (up to ``unanswered_limit``) and its standing acceptance's minimum notice (None:
    none GRANTED)."""

    checks: list[bool]
    sent: list[datetime]
    unanswered: int
    standing_min_notice: int | None
    patient_ref: str


@dataclass(frozen=True)
class NoOffer:
    """``offer_terms``' answer when the candidate is not offered: RESTART, INELIGIBLE (``reason``: the rule's code)
    or UNREACHABLE (``unreachable``: why, and until when)."""

    outcome: str
    reason: str = ""
    unreachable: Unreachable | None = None


@dataclass(frozen=True)
class OfferTerms:
    """``offer_terms``' answer with an offer (OFFER, BOOK, ANSWERED): when it expires, until when a standing booking
    may be released, what it records of its decision (the offer's ``decision_*`` fields) and of its policy."""

    outcome: str
    expires_at: datetime
    release_until: datetime | None
    decision: dict
    #: Whether the offer's own notice goes out (OFFER: not when the patient's yes is already given).
    notice: bool
    #: The digest of the policy version the offer runs under (``WaitlistPolicy.digest``), recorded with it.
    policy_digest: str


def offer_terms(*, policy, vacancy, facts: EntryFacts, decision: Decision | None, now: datetime,
                staff_reviewed: bool = False, late: bool = False) -> OfferTerms | NoOffer:
    """The terms on which ``vacancy`` (its ``starts_at`` and clinic) may be offered now to the entry ``facts``
    describe, under ``policy``, on ``decision`` (NOT_USED when the policy's gate is off).

    ``staff_reviewed`` (staff review's PROMOTE): staff accepted the decision as it is, and their choice needs no
    reachability check. ``late`` (a late accept): the patient is answering now, so the rules that bound what the
    list asks of a patient are waived (``eligibility.LATE_ACCEPT_WAIVED``) and nothing is asked or sent.
    A standing acceptance that applies is booked at once, staff-reviewed or not (staff vouched for the decision).
    """
    gated = policy.decision_gate == DecisionGate.REQUIRED
    if gated and not staff_reviewed and (decision is None or decision.effective_status(now) != DecisionStatus.FRESH):
        return NoOffer(RESTART)
    reason = first_failed(facts.checks, LATE_ACCEPT_WAIVED if late else ())
    if reason is not None:
        return NoOffer(INELIGIBLE, reason=reason)
    standing = not late and standing_outcome(
        policy, facts.standing_min_notice, starts_at=vacancy.starts_at, now=now) == APPLIES
    answered = standing or late  # the patient's yes is already given: nothing to ask or send
    if not staff_reviewed and not answered:
        # A standing booking needs no answer: its notice waits in the outbox for quiet hours and the daily cap
        # like any other.
        unreachable, _cap = reach_now(policy=policy, clinic=vacancy.clinic, now=now, patient_ref=facts.patient_ref,
                                      sent=facts.sent)
        if unreachable is not None:
            return NoOffer(UNREACHABLE, unreachable=unreachable)
    rule = window_rule(policy, vacancy.clinic.timezone, unanswered=0 if answered else facts.unanswered)
    expires_at = answer_deadline(rule, start=now, slot_starts_at=vacancy.starts_at)
    return OfferTerms(
        BOOK if standing else ANSWERED if late else OFFER,
        expires_at=expires_at,
        release_until=release_deadline(policy, booked_at=now, starts_at=vacancy.starts_at) if standing else None,
        decision=offer_decision(decision, gated=gated, staff_reviewed=staff_reviewed, now=now, expires_at=expires_at),
        notice=not answered,
        policy_digest=policy.digest(),
    )
