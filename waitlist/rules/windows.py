"""How long a patient has to answer an offer: the one definition of the answer window.

A fixed window gives a vacancy five days out the same minutes per patient as one in three hours, so
the cascade reaches few patients before the slot starts and a slow responder never gets the time to
answer. ``LEAD_TIME`` makes the window a share of the time left (between a floor and a ceiling) and
always ends it ``margin`` before the slot starts. Under either rule time in which the patient cannot
be reached (the clinic's quiet hours) does not count: an offer made at 20:30 with a two-hour window
runs into the next morning instead of expiring overnight.

A patient whose last offers all went unanswered (their windows ran out with no reply) would spend the
next vacancy's whole window too, while patients who answer wait behind them: with
``answer_window_unanswered_minutes`` set, such a patient (``answer_window_unanswered_after`` unanswered offers
in a row) gets at most that many minutes. Any answer (a decline, an accept) ends the run.

Pure Python on plain values, so the simulator's modelled policies use exactly the product's rule; the one
read, ``unanswered_streak``, is kept apart from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from common.notify import quiet_hours_until

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
    patient whose last ``unanswered`` offers went unanswered (``unanswered_streak``)."""
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


NO_OFFER_BEFORE = 2**63 - 1


def unanswered_limit(policy) -> int:
    """How many latest offers the streak looks at: the policy's ``answer_window_unanswered_after`` (0: none)."""
    after = getattr(policy, "answer_window_unanswered_after", 0) or 0
    return after if getattr(policy, "answer_window_unanswered_minutes", None) else 0


def unanswered_streak(policy, entry_id: int, *, before_offer_id: int | None = None) -> int:
    """How many of the entry's latest offers (before ``before_offer_id``, if given) went unanswered in a row, up
    to the policy's ``answer_window_unanswered_after``; 0 without a query when the policy has no such limit.

    An offer counts as unanswered when its window ran out (EXPIRED, reason ``EXPIRED``); a decline, an accept
    (a hold that expired after it, ``HOLD_EXPIRED``, too) answers; withdrawn offers and standing bookings are
    left out. Read at an offer's notice's delivery; promotion reads the same subquery with its entry lock
    (``waitlist.queries``)."""
    return unanswered_count(entry_id, unanswered_limit(policy), before_offer_id=before_offer_id)


def unanswered_count(entry_id: int, limit: int, *, before_offer_id: int | None = None) -> int:
    """Up to ``limit`` latest offers of one entry unanswered in a row (0: no query)."""
    if not limit:
        return 0
    from waitlist import queries  # the rules stay importable without the ORM (the simulator's windows)

    return queries.unanswered_count(entry_id, limit, before_offer_id or NO_OFFER_BEFORE)


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
