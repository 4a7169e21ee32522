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

from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from scheduling.models import Clinic
from waitlist import queries
from waitlist.figures.kept import kept
from waitlist.models import Vacancy, VacancyStatus

#: The pictures' window: a month, whatever the fill metrics' window.
WINDOW_DAYS = 30


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


def fill_over_time(*, clinic: Clinic, now: datetime | None = None, window_days: int = WINDOW_DAYS) -> list[FillDay]:
    """One row per local day of the window, oldest first, days without vacancies included. One grouped query
    (the ORM's ``TruncDate`` in the clinic's zone is the ``(created_at AT TIME ZONE tz)::date`` it groups by)."""
    window = _window(clinic, now, window_days)
    filled = Q(status=VacancyStatus.FILLED)
    counted = {
        row["day"]: row
        for row in Vacancy.objects.filter(clinic_id=clinic.pk, created_at__gte=window["since"])
        .annotate(day=TruncDate("created_at", tzinfo=ZoneInfo(window["tz"])))
        .values("day")
        .annotate(
            filled=Count("id", filter=filled),
            exhausted=Count("id", filter=~filled & Q(exhausted_at__isnull=False)),
            expired=Count("id", filter=Q(status=VacancyStatus.CLOSED, close_reason="STARTED",
                                         exhausted_at__isnull=True)),
        )
        .order_by()
    }
    days = (window["first"] + timedelta(days=i) for i in range((window["last"] - window["first"]).days + 1))
    return [FillDay(day, *((counted[day]["filled"], counted[day]["exhausted"], counted[day]["expired"])
                           if day in counted else (0, 0, 0))) for day in days]


def fairness_over_time(*, clinic: Clinic, now: datetime | None = None,
                       window_days: int = WINDOW_DAYS) -> list[FairnessDay]:
    """One row per local day of the window, oldest first, days without bookings included."""
    return [FairnessDay(day, booked, None if p50 is None else round(float(p50) / 86400, 1))
            for day, booked, p50 in queries.fairness_over_time_days(_window(clinic, now, window_days))]


def pictures_kept(*, clinic: Clinic) -> dict:
    """Both series, kept per clinic like the other figures (they change over hours, not per reload)."""
    return {"fill": kept("fill_over_time", clinic, lambda: fill_over_time(clinic=clinic)),
            "fairness": kept("fairness_over_time", clinic, lambda: fairness_over_time(clinic=clinic))}
