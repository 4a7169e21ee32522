"""How long a patient has to answer an offer: the one definition of the answer window.

A fixed window gives a vacancy five days out the same minutes per patient as one in three hours, so
the cascade reaches few patients before the slot starts and a slow responder never gets the time to
answer. ``LEAD_TIME`` makes the window a share of the time left (between a floor and a ceiling) and
always ends it ``margin`` before the slot starts. Under either rule time in which the patient cannot
be reached (the clinic's quiet hours) does not count: an offer made at 20:30 with a two-hour window
runs into the next morning instead of expiring overnight.

Pure Python on plain values, so the simulator's modelled policies use exactly the product's rule.
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

    def to_dict(self) -> dict:
        return {k: (v.isoformat() if isinstance(v, time) else v) for k, v in self.__dict__.items()}


def window_rule(policy, tz_name: str) -> WindowRule:
    """The rule of a ``WaitlistPolicy`` row (or anything with its field names) in clinic ``tz_name``."""
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
    )


def window_length(rule: WindowRule, *, start: datetime, slot_starts_at: datetime) -> timedelta:
    """The reachable time the patient gets, before the slot's margin caps it."""
    if rule.kind == FIXED:
        return timedelta(minutes=rule.fixed_minutes)
    share = (slot_starts_at - start) * (rule.percent / 100)
    return min(max(share, timedelta(minutes=rule.min_minutes)), timedelta(minutes=rule.max_minutes))


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
