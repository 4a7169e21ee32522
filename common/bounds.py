"""Sane ranges for client-supplied instants, so an absurd year is a typed 400, never a 500 later.

Python's datetime stops at year 9999 and PostgreSQL's timestamptz does not, so an instant near
either calendar edge can be stored and then fail on every read (or overflow when shifted to UTC).
Every time a client sends is checked here first:

- bookings (appointment starts, waitlist windows, decision expiries): ``now - 1 year`` to
  ``now + 5 years`` (``BOOKING_PAST_DAYS`` / ``BOOKING_FUTURE_DAYS``);
- source times reported by a CRM (``occurredAt``): ``EVENT_EARLIEST`` (2000-01-01) to
  ``now + EVENT_FUTURE_SKEW_HOURS`` (a clock a little ahead is tolerated, a future one is not).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.utils import timezone

EVENT_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)


#: What a client is told when a date-time comes without an offset (``parse_instant``).
OFFSET_REQUIRED = "Give an offset (Z or ±hh:mm): a date-time without one names no instant."


class NaiveInstant(ValueError):
    """A date-time without an offset: which instant it means depends on a zone the caller did not name."""


def parse_instant(text: str) -> datetime:
    """The one rule for a client's date-time (the API's fields, waitlist windows, FHIR searches): ISO 8601
    with an offset. ``NaiveInstant`` without one (read as UTC or as the clinic's zone it would move by hours, and
    a wall time in a DST gap or a repeated hour has no single meaning); ``ValueError`` when it is no date-time."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if value.utcoffset() is None:
        raise NaiveInstant(text)
    return value


def booking_range(now: datetime | None = None) -> tuple[datetime, datetime]:
    now = now or timezone.now()
    return (
        now - timedelta(days=settings.BOOKING_PAST_DAYS),
        now + timedelta(days=settings.BOOKING_FUTURE_DAYS),
    )


def event_range(now: datetime | None = None) -> tuple[datetime, datetime]:
    now = now or timezone.now()
    return EVENT_EARLIEST, now + timedelta(hours=settings.EVENT_FUTURE_SKEW_HOURS)


def within(value: datetime, bounds: tuple[datetime, datetime]) -> bool:
    """True when the aware ``value`` lies in ``bounds``; an instant Python cannot shift is outside."""
    try:
        return value.utcoffset() is not None and bounds[0] <= value.astimezone(UTC) <= bounds[1]
    except (OverflowError, ValueError):
        return False


def is_bookable_time(value: datetime) -> bool:
    return within(value, booking_range())


#: The days a list filter or a search may ask for: far wider than any row can be, far inside what Python's
#: datetime and PostgreSQL hold, so a day near either calendar edge (``9999-12-31``, year 1) is a typed 400
#: instead of an OverflowError when it is shifted to a zone or widened by a window.
SEARCH_DAYS = (date(1900, 1, 1), date(2999, 12, 31))


def is_searchable_day(value: date) -> bool:
    return SEARCH_DAYS[0] <= value <= SEARCH_DAYS[1]


SEARCH_DAY_MESSAGE = "Give a day between 1900-01-01 and 2999-12-31."
