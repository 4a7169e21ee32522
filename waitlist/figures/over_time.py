"""The Waitlist page's pictures: fill over time and fairness over time, per local day (one grouped query each).

Per day of the vacancy's opening in the clinic's zone, each vacancy counted once by how it ended:
**filled** (FILLED), **exhausted** (dispatch once ran out of candidates and it was never filled: the fill
metrics' definition), **expired** (CLOSED because the slot started, candidates not exhausted). Fairness per
local day of booking through an offer: how many were booked and the median days the booked patients had waited
(``waiting_since`` → the BOOKED event). Counts only, no rows, no names.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db import connection
from django.utils import timezone

from scheduling.models import Clinic
from waitlist.figures.kept import kept
from waitlist.models import Offer, OfferEvent, Vacancy, WaitlistEntry

#: The pictures' window: a month, whatever the fill metrics' window.
WINDOW_DAYS = 30

FILL_SQL = """
WITH days AS (
    SELECT generate_series(%(first)s::date, %(last)s::date, interval '1 day')::date AS day
), v AS (
    SELECT (created_at AT TIME ZONE %(tz)s)::date AS day,
           COUNT(*) FILTER (WHERE status = 'FILLED') AS filled,
           COUNT(*) FILTER (WHERE status <> 'FILLED' AND exhausted_at IS NOT NULL) AS exhausted,
           COUNT(*) FILTER (WHERE status = 'CLOSED' AND close_reason = 'STARTED' AND exhausted_at IS NULL) AS expired
    FROM {vacancy} WHERE clinic_id = %(clinic)s AND created_at >= %(since)s GROUP BY 1
)
SELECT d.day, COALESCE(v.filled, 0), COALESCE(v.exhausted, 0), COALESCE(v.expired, 0)
FROM days d LEFT JOIN v ON v.day = d.day ORDER BY d.day
"""

FAIRNESS_SQL = """
WITH days AS (
    SELECT generate_series(%(first)s::date, %(last)s::date, interval '1 day')::date AS day
), b AS (
    SELECT (e.created_at AT TIME ZONE %(tz)s)::date AS day,
           COUNT(*) AS booked,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM e.created_at - w.waiting_since)) AS p50
    FROM {event} e JOIN {offer} o ON o.id = e.offer_id JOIN {entry} w ON w.id = o.entry_id
    WHERE e.clinic_id = %(clinic)s AND e.reason_code = 'BOOKED' AND e.created_at >= %(since)s GROUP BY 1
)
SELECT d.day, COALESCE(b.booked, 0), b.p50 FROM days d LEFT JOIN b ON b.day = d.day ORDER BY d.day
"""


@dataclass(frozen=True)
class FillDay:
    day: date
    filled: int
    exhausted: int
    expired: int


@dataclass(frozen=True)
class FairnessDay:
    day: date
    booked: int
    #: Median days waited by the patients booked that day; None without bookings.
    waited_days_p50: float | None


def _window(clinic: Clinic, now: datetime | None, window_days: int) -> dict:
    tz = clinic.timezone
    last = timezone.localtime(now or timezone.now(), timezone=ZoneInfo(tz)).date()
    first = last - timedelta(days=window_days - 1)
    return {"first": first, "last": last, "tz": tz, "clinic": clinic.pk,
            "since": datetime.combine(first, datetime.min.time(), tzinfo=ZoneInfo(tz))}


def _rows(sql: str, params: dict) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def fill_over_time(*, clinic: Clinic, now: datetime | None = None, window_days: int = WINDOW_DAYS) -> list[FillDay]:
    """One row per local day of the window, oldest first, days without vacancies included."""
    sql = FILL_SQL.format(vacancy=Vacancy._meta.db_table)
    return [FillDay(*row) for row in _rows(sql, _window(clinic, now, window_days))]


def fairness_over_time(*, clinic: Clinic, now: datetime | None = None,
                       window_days: int = WINDOW_DAYS) -> list[FairnessDay]:
    """One row per local day of the window, oldest first, days without bookings included."""
    sql = FAIRNESS_SQL.format(event=OfferEvent._meta.db_table, offer=Offer._meta.db_table,
                              entry=WaitlistEntry._meta.db_table)
    return [FairnessDay(day, booked, None if p50 is None else round(float(p50) / 86400, 1))
            for day, booked, p50 in _rows(sql, _window(clinic, now, window_days))]


def pictures_kept(*, clinic: Clinic) -> dict:
    """Both series, kept per clinic like the other figures (they change over hours, not per reload)."""
    return {"fill": kept("fill_over_time", clinic, lambda: fill_over_time(clinic=clinic)),
            "fairness": kept("fairness_over_time", clinic, lambda: fairness_over_time(clinic=clinic))}
