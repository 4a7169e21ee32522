"""When a patient can come: a 21-bit mask of (day of week, part of the day), clinic-local.

Bit ``day * 3 + part``: ``day`` 0 = Monday … 6 = Sunday, ``part`` 0 = morning (before 12:00), 1 = afternoon
(12:00–17:00), 2 = evening (from 17:00), read at the slot's start in the clinic's time zone. One integer on the
entry, so the matcher's rule is one bitwise test per row (``waitlist.queries`` UNAVAILABLE) and the Python
rule here is the same arithmetic (``fits``), which the parity test holds them to.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
PARTS = ("MORNING", "AFTERNOON", "EVENING")
#: Where an afternoon and an evening begin (clinic-local hours).
AFTERNOON_FROM, EVENING_FROM = 12, 17
ANY_TIME = (1 << (len(DAYS) * len(PARTS))) - 1


def part_of_day(hour: int) -> int:
    return 0 if hour < AFTERNOON_FROM else 1 if hour < EVENING_FROM else 2


def slot_bit(starts_at: datetime, tz_name: str) -> int:
    """The bit of the (day, part) a slot starting at ``starts_at`` falls in, in the clinic's zone."""
    local = starts_at.astimezone(ZoneInfo(tz_name))
    return 1 << (local.weekday() * len(PARTS) + part_of_day(local.hour))


def fits(mask: int, starts_at: datetime, tz_name: str) -> bool:
    return bool(mask & slot_bit(starts_at, tz_name))


def mask_of(days, parts) -> int:
    """Every part in ``parts`` on every day in ``days`` (names from ``DAYS``/``PARTS``)."""
    return sum(1 << (DAYS.index(day) * len(PARTS) + PARTS.index(part)) for day in set(days) for part in set(parts))


def mask_of_slots(slots) -> int:
    """``["MON:MORNING", …]`` as a mask; ValueError for an unknown name."""
    mask = 0
    for slot in slots:
        day, _, part = str(slot).partition(":")
        mask |= 1 << (DAYS.index(day) * len(PARTS) + PARTS.index(part))
    return mask


def slots_of(mask: int) -> list[str]:
    return [f"{day}:{part}" for d, day in enumerate(DAYS) for p, part in enumerate(PARTS)
            if mask & (1 << (d * len(PARTS) + p))]


def as_body(mask: int) -> dict:
    """The API's shape: ``any_time`` and the ``slots`` the patient can come."""
    return {"any_time": mask == ANY_TIME, "slots": slots_of(mask)}
