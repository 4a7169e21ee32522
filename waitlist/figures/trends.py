"""Waitlist reads for the console's trend chart: per local day over the metrics window (one query).

Same definitions as ``selectors.metrics.fill_metrics`` (docs/waitlist.md "Fill metrics"), per day of the
vacancy's opening in the clinic's zone: fill rate = FILLED / (FILLED + CLOSED); time to fill p50 =
opened → BOOKED event; offers sent = offers created that day. Counts only, no rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.utils import timezone

from scheduling.models import Clinic
from waitlist import queries
from waitlist.figures.metrics import metrics_window_days


@dataclass(frozen=True)
class TrendDay:
    day: date
    filled: int
    decided: int
    #: Median seconds from opening to booking of the day's filled vacancies; None without fills.
    time_to_fill_p50: float | None
    offers_sent: int

    @property
    def fill_rate(self) -> float | None:
        return self.filled / self.decided if self.decided else None


def daily_trend(*, clinic: Clinic, now: datetime | None = None, window_days: int | None = None) -> list[TrendDay]:
    """One row per local day of the window, oldest first, days without activity included."""
    now = now or timezone.now()
    window_days = window_days or metrics_window_days()
    tz = clinic.timezone
    last = timezone.localtime(now, timezone=ZoneInfo(tz)).date()
    first = last - timedelta(days=window_days - 1)
    since = datetime.combine(first, datetime.min.time(), tzinfo=ZoneInfo(tz))
    rows = queries.trend_days(clinic_id=clinic.pk, tz=tz, first=first, last=last, since=since)
    return [TrendDay(day, filled, decided, float(p50) if p50 is not None else None, sent)
            for day, filled, decided, p50, sent in rows]
