"""Keyset pagination by ref: one query per page, never OFFSET.

The cursor is the ref of the last row already shown. It is resolved inside the page query (a
subquery on the same, already scoped, queryset), so a foreign or unknown cursor simply yields an
empty page and page N costs what page 1 costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db.models import Q, QuerySet, Subquery

from .bounds import SEARCH_DAY_MESSAGE, is_searchable_day
from .errors import ValidationFailed


@dataclass(frozen=True)
class KeysetPage:
    items: list
    #: The ref of the last row shown when more rows follow; ``None`` on the last page.
    next: str | None


def keyset_page(
    queryset: QuerySet, *, field: str, limit: int, after: str = "", descending: bool = False
) -> KeysetPage:
    """Order by ``(field, id)`` (both descending when asked) and cut one page after ``after``.

    The redundant ``field <=/>= cursor`` bound lets PostgreSQL range-scan an index that leads
    with the scope and ``field``; the OR only settles ties on the boundary value.
    """
    rows = queryset
    if after:
        cursor = queryset.filter(ref=after)
        cursor_value = Subquery(cursor.values(field)[:1])
        cursor_id = Subquery(cursor.values("id")[:1])
        if descending:
            rows = rows.filter(**{f"{field}__lte": cursor_value}).filter(
                Q(**{f"{field}__lt": cursor_value}) | Q(**{field: cursor_value, "id__lt": cursor_id})
            )
        else:
            rows = rows.filter(**{f"{field}__gte": cursor_value}).filter(
                Q(**{f"{field}__gt": cursor_value}) | Q(**{field: cursor_value, "id__gt": cursor_id})
            )
    order = (f"-{field}", "-id") if descending else (field, "id")
    items = list(rows.order_by(*order)[: limit + 1])
    has_more = len(items) > limit
    items = items[:limit]
    return KeysetPage(items=items, next=items[-1].ref if has_more and items else None)


def day_bounds(day: date, tz_name: str) -> tuple[datetime, datetime]:
    """A local calendar day in the clinic's zone as a half-open UTC-aware range (a day near the calendar's
    edges is a typed 400: ``9999-12-31`` has no next day; forms and serializers check it first)."""
    if not is_searchable_day(day):
        raise ValidationFailed(SEARCH_DAY_MESSAGE, fields={"date": [SEARCH_DAY_MESSAGE]})
    zone = ZoneInfo(tz_name)
    start = datetime.combine(day, time.min, tzinfo=zone)
    return start, datetime.combine(day + timedelta(days=1), time.min, tzinfo=zone)
