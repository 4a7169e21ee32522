"""What becomes of an automatic ("standing acceptance") booking: acknowledged, released, or left unread.

Shared by the real runs (``sim.engine``, on the product's booking notice and ``release_until``) and the modelled
competitors (``sim.models``), so both meet the same patients the same way.

A booking counts as attended only once its patient has acknowledged it: they read its notice and would have said
yes (``Month.answer_at``; a patient who never reads never acknowledges). One who would have said no releases it
before its ``release_until`` if they read it in time.

``release_unacknowledged`` (a policy parameter of the simulator, ``PolicySpec.release_unacknowledged``): the
product releases a booking still unacknowledged at the release point, the later of 2 h after booking and 24 h
before the slot, never at or after ``release_until``, after a reminder an hour before, and refills the slot.
**Not yet in the product** (the text-message issue #39 builds it): the simulator performs it through the
product's own ``standing_release`` (as the system, not the patient).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .generator import Booking, Month

AFTER_BOOKING = timedelta(hours=2)
BEFORE_SLOT = timedelta(hours=24)
REMINDER_BEFORE = timedelta(hours=1)


@dataclass(frozen=True)
class Outcome:
    case: str  # ACCEPTED (acknowledged), RELEASED (by the patient), RELEASED_UNACKNOWLEDGED, UNREAD, LATE_DECLINE
    release_at: datetime | None  # when the release happens (patient or product)
    acknowledged_at: datetime | None
    reminder_at: datetime | None  # the reminder the product sends (a message), if it sends one


def release_point(booked_at: datetime, starts_at: datetime, release_until: datetime | None) -> datetime | None:
    """When the product releases a still unacknowledged booking, or None when it can no longer be released."""
    if release_until is None:
        return None
    point = min(max(booked_at + AFTER_BOOKING, starts_at - BEFORE_SLOT), release_until - timedelta(minutes=1))
    return point if point > booked_at else None


def reminder_time(month: Month, sent_at: datetime, point: datetime) -> datetime | None:
    """An hour before the release point, moved before quiet hours if it falls in them; None if that is not after
    the booking notice."""
    from .metrics import in_quiet_hours

    at = point - REMINDER_BEFORE
    while in_quiet_hours(at, month) and at > sent_at:
        at -= timedelta(minutes=30)
    return at if at > sent_at else None


def outcome(month: Month, entry_key: str, booking: Booking, sent_at: datetime, release_until: datetime | None,
            release_unacknowledged: bool) -> Outcome:
    """The booking's fate once its notice reached the patient at ``sent_at``."""
    reply = month.reply(entry_key, booking)
    acts = month.answer_at(sent_at, reply) if reply.kind != "NONE" else None
    point = release_point(sent_at, booking.starts_at, release_until) if release_unacknowledged else None
    reminder = reminder_time(month, sent_at, point) if point is not None else None
    if reminder is not None and acts is not None and acts <= reminder:
        reminder = None  # they acted before it was due
    if acts is not None and (point is None or acts < point):
        if reply.kind == "ACCEPT":
            if acts < booking.starts_at:
                return Outcome("ACCEPTED", None, acts, reminder)
            return Outcome("UNREAD", None, None, reminder)
        if release_until is not None and acts < release_until:
            return Outcome("RELEASED", acts, None, reminder)
        return Outcome("LATE_DECLINE", None, None, reminder)
    if point is not None:
        return Outcome("RELEASED_UNACKNOWLEDGED", point, None, reminder)
    return Outcome("UNREAD", None, None, reminder)
