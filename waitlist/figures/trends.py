"""Waitlist reads for the console's trend chart: per local day over the metrics window (one query).

Same definitions as ``selectors.metrics.fill_metrics`` (docs/waitlist.md "Fill metrics"), per day of the
vacancy's opening in the clinic's zone: fill rate = FILLED / (FILLED + CLOSED); time to fill p50 =
opened → BOOKED event; offers sent = offers created that day. Counts only, no rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db import connection
from django.utils import timezone

from scheduling.models import Clinic
from waitlist.figures.metrics import metrics_window_days
from waitlist.models import Offer, OfferEvent, Vacancy

TREND_SQL = """
WITH days AS (
    SELECT generate_series(%(first)s::date, %(last)s::date, interval '1 day')::date AS day
), v AS (
    SELECT id, status, created_at, (created_at AT TIME ZONE %(tz)s)::date AS day FROM {vacancy}
    WHERE clinic_id = %(clinic)s AND created_at >= %(since)s
), filled AS (
    SELECT v.day, EXTRACT(EPOCH FROM MIN(e.created_at) - v.created_at) AS seconds
    FROM v JOIN {offer} o ON o.vacancy_id = v.id
    JOIN {event} e ON e.offer_id = o.id AND e.reason_code = 'BOOKED'
    WHERE v.status = 'FILLED'
    GROUP BY v.id, v.day, v.created_at
), sent AS (
    SELECT (created_at AT TIME ZONE %(tz)s)::date AS day, COUNT(*) AS n FROM {offer}
    WHERE clinic_id = %(clinic)s AND created_at >= %(since)s GROUP BY 1
), decided AS (
    SELECT day, COUNT(*) FILTER (WHERE status = 'FILLED') AS filled,
           COUNT(*) FILTER (WHERE status IN ('FILLED', 'CLOSED')) AS decided
    FROM v GROUP BY day
), ttf AS (
    SELECT day, percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) AS p50 FROM filled GROUP BY day
)
SELECT d.day, COALESCE(decided.filled, 0), COALESCE(decided.decided, 0), ttf.p50, COALESCE(sent.n, 0)
FROM days d
LEFT JOIN decided ON decided.day = d.day
LEFT JOIN ttf ON ttf.day = d.day
LEFT JOIN sent ON sent.day = d.day
ORDER BY d.day
"""


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
    sql = TREND_SQL.format(vacancy=Vacancy._meta.db_table, offer=Offer._meta.db_table,
                           event=OfferEvent._meta.db_table)
    since = datetime.combine(first, datetime.min.time(), tzinfo=ZoneInfo(tz))
    with connection.cursor() as cursor:
        cursor.execute(sql, {"first": first, "last": last, "tz": tz, "clinic": clinic.pk, "since": since})
        rows = cursor.fetchall()
    return [TrendDay(day, filled, decided, float(p50) if p50 is not None else None, sent)
            for day, filled, decided, p50, sent in rows]
