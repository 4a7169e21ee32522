"""The overview's trend chart: fill rate, time to fill and offers sent per local day, as inline SVG."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from operations.charts import trend_chart
from tests.conftest import seoul
from tests.operations.waitlist_helpers import bulk_vacancies, make_offer
from tests.waitlist.factories import NOW
from waitlist.figures.trends import daily_trend
from waitlist.models import Vacancy, VacancyStatus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]


def test_daily_trend_counts_per_local_day_with_empty_days_included(world, settings):
    settings.WAITLIST_METRICS_WINDOW_DAYS = 7
    make_offer(world, starts_at=seoul(4, 10))
    make_offer(world, starts_at=seoul(4, 12))
    bulk_vacancies(world, 4)  # two CLOSED, two OPEN, opened today
    yesterday = Vacancy.objects.filter(status=VacancyStatus.CLOSED).first()
    Vacancy.objects.filter(pk=yesterday.pk).update(created_at=NOW - timedelta(days=1))
    days = daily_trend(clinic=world.clinic)
    assert len(days) == 7 and days[-1].day == NOW.date()
    today, before = days[-1], days[-2]
    assert today.offers_sent == 2 and today.decided == 1 and today.fill_rate == 0.0
    assert before.decided == 1 and before.offers_sent == 0
    assert all(d.decided == 0 and d.fill_rate is None for d in days[:-2])


def test_the_overview_shows_the_chart_with_three_series(staff_web, world):
    make_offer(world, starts_at=seoul(4, 10))
    html = staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert 'data-testid="trend-chart"' in html and "<svg" in html
    for series in ("fill_rate", "time_to_fill", "offers_sent"):
        assert f'<g class="series series-{series}"' in html
    assert re.search(r'<rect [^>]*class="bar"><title>\d\d-\d\d: 1</title>', html)


def test_chart_geometry_scales_each_series_to_its_panel():
    from datetime import date

    from waitlist.figures.trends import TrendDay

    days = [TrendDay(date(2030, 12, 1), 1, 2, 3600.0, 4), TrendDay(date(2030, 12, 2), 2, 2, 7200.0, 2)]
    chart = trend_chart(days)
    rates, ttf, sent = chart["panels"]
    assert len(rates.dots) == 2 and rates.dots[1]["title"] == "12-02: 100%"
    assert ttf.summary == "max 2.0 h"
    assert [b["title"] for b in sent.bars] == ["12-01: 4", "12-02: 2"]
    assert float(sent.bars[0]["height"]) == 2 * float(sent.bars[1]["height"])


@pytest.mark.parametrize("size", [2, 20])
def test_overview_query_count_does_not_grow_with_the_clinic(staff_web, world, size, django_assert_max_num_queries):
    bulk_vacancies(world, size)
    with django_assert_max_num_queries(7):
        assert staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": world.clinic.ref})).status_code == 200


def test_the_chart_has_date_ticks_value_axes_and_a_table_of_its_numbers():
    from datetime import date

    from waitlist.figures.trends import TrendDay

    days = [TrendDay(date(2030, 12, 1) + timedelta(days=i), 1, 2, 3600.0, i) for i in range(15)]
    chart = trend_chart(days)
    assert [t["label"] for t in chart["ticks"]] == ["12-01", "12-08", "12-15"]
    assert [p.max_label for p in chart["panels"]] == ["100%", "1.0 h", "14"]
    assert chart["table"][0] == {"day": date(2030, 12, 1), "fill_rate": "50%", "time_to_fill": "1.0 h",
                                 "offers_sent": 0}


def test_the_value_axis_sits_right_of_the_newest_days_dot_and_bar():
    """The axis labels are drawn right-aligned at the chart's right edge: the plot stops short of it, so the
    newest day's dot or bar never sits under "100%" (the overview's chart drew them on top of each other)."""
    from datetime import date

    from waitlist.figures.trends import TrendDay

    days = [TrendDay(date(2030, 12, 1) + timedelta(days=i), 1, 1, 60.0, 3) for i in range(30)]
    chart = trend_chart(days)
    label_room = chart["width"] - 40  # "100%" right-aligned at the edge takes about 30 units
    for panel in chart["panels"]:
        right = [float(d["x"]) + 2.5 for d in panel.dots] + [float(b["x"]) + float(b["width"]) for b in panel.bars]
        assert max(right) < label_room, panel.key
