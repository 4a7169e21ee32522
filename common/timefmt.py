"""Times are stored in UTC and shown in the clinic's zone."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo


def iso_in_zone(value: datetime | None, tz_name: str) -> str | None:
    if value is None:
        return None
    return value.astimezone(ZoneInfo(tz_name)).isoformat()
