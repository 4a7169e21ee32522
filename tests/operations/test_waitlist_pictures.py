"""The Waitlist page's pictures (issue 44 §5) and upkeep card (issue 40): fill and fairness over time per local
day, as SVG with labelled axes and the same numbers in a table; the upkeep questions by outcome."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from operations.charts import fairness_chart, fill_chart
from tests.conftest import seoul
from tests.operations.waitlist_helpers import make_offer
from tests.waitlist.factories import NOW
from waitlist.figures.over_time import fairness_over_time, fill_over_time
from waitlist.joining.models import UpkeepAsk, UpkeepOutcome
from waitlist.models import OfferEvent, Vacancy, VacancyStatus, WaitlistEntry

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]


def _vacancy(world, i: int, *, opened, status=VacancyStatus.OPEN, exhausted=False, close_reason=""):
    starts = seoul(5, 8) + timedelta(minutes=30 * i)
    vacancy = Vacancy.objects.create(
        vacancy_key=f"pic:{world.clinic.pk}:{i}", clinic=world.clinic, tenant_group=world.clinic.tenant_group,
        practitioner=world.doctor, treatment=world.treatment, starts_at=starts, ends_at=starts + timedelta(minutes=30))
    Vacancy.objects.filter(pk=vacancy.pk).update(created_at=opened, status=status, close_reason=close_reason,
                                                 exhausted_at=opened + timedelta(hours=1) if exhausted else None)
    return vacancy


def _month(world):
    """Today (Seoul): 2 filled, 1 exhausted; yesterday: 1 expired, 1 exhausted and then closed (counted exhausted),
    1 staff-closed (neither); 1:00 Seoul today is still the previous UTC day; 31 days ago is outside the window."""
    _vacancy(world, 1, opened=NOW, status=VacancyStatus.FILLED)
    _vacancy(world, 2, opened=seoul(1, 1), status=VacancyStatus.FILLED)
    _vacancy(world, 3, opened=NOW, exhausted=True)
    _vacancy(world, 4, opened=NOW - timedelta(days=1), status=VacancyStatus.CLOSED, close_reason="STARTED")
    _vacancy(world, 5, opened=NOW - timedelta(days=1), status=VacancyStatus.CLOSED, close_reason="STARTED",
             exhausted=True)
    _vacancy(world, 6, opened=NOW - timedelta(days=1), status=VacancyStatus.CLOSED, close_reason="STAFF_CLOSED")
    _vacancy(world, 7, opened=NOW - timedelta(days=31), status=VacancyStatus.FILLED)


def test_fill_over_time_counts_each_vacancy_once_per_local_day_of_opening(world):
    _month(world)
    days = fill_over_time(clinic=world.clinic)
    assert len(days) == 30 and days[-1].day == NOW.date() and days[0].day == NOW.date() - timedelta(days=29)
    today, yesterday = days[-1], days[-2]
    assert (today.filled, today.exhausted, today.expired) == (2, 1, 0)
    assert (yesterday.filled, yesterday.exhausted, yesterday.expired) == (0, 1, 1)
    assert all((d.filled, d.exhausted, d.expired) == (0, 0, 0) for d in days[:-2])


def test_fairness_over_time_counts_bookings_and_the_median_days_waited_per_local_day_of_booking(world):
    waited = [10, 20, 60]
    for days_waited in waited:
        offer = make_offer(world, starts_at=seoul(4, 10 + days_waited // 10))
        WaitlistEntry.objects.filter(pk=offer.entry_id).update(waiting_since=NOW - timedelta(days=days_waited))
        OfferEvent.objects.create(clinic=world.clinic, offer=offer, from_status="ACCEPTED", to_status="ACCEPTED",
                                  reason_code="BOOKED", actor="system:test", correlation_id="c", created_at=NOW)
    days = fairness_over_time(clinic=world.clinic)
    assert days[-1].booked == 3 and days[-1].waited_days_p50 == 20.0
    assert all(d.booked == 0 and d.waited_days_p50 is None for d in days[:-1])


def test_the_fill_chart_labels_its_axes_and_its_table_has_the_same_numbers(world):
    _month(world)
    chart = fill_chart(fill_over_time(clinic=world.clinic))
    assert [p.label for p in chart["panels"]] == ["Filled (vacancies)", "Exhausted (vacancies)",
                                                   "Expired (vacancies)"]
    filled = chart["panels"][0]
    assert filled.bars[-1]["title"] == f"{NOW:%m-%d}: 2" and filled.max_label == "2"
    assert chart["table"][-1] == {"day": NOW.date(), "values": ["2", "1", "0"]}
    assert chart["table"][-2]["values"] == ["0", "1", "1"]
    assert [t["label"] for t in chart["ticks"]][::len(chart["ticks"]) - 1] == [
        f"{NOW - timedelta(days=29):%m-%d}", f"{NOW:%m-%d}"]


def test_the_waitlist_page_shows_both_charts_with_axis_labels_and_tables(staff_web, world):
    _month(world)
    html = staff_web.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert 'data-testid="metrics"' in html  # the numbers cards stay
    for slug in ("fill", "fairness"):
        figure = html.split(f'data-testid="chart-{slug}"', 1)[1].split("</figure>", 1)[0]
        assert "<svg" in figure and "<script" not in figure
        assert f"day (MM-DD, {world.clinic.timezone})" in figure
        assert f'data-testid="chart-{slug}-table"' in figure
    fill = html.split('data-testid="chart-fill-table"', 1)[1].split("</table>", 1)[0]
    row = re.search(rf'<th scope="row">{NOW:%Y-%m-%d}</th>(.*?)</tr>', fill).group(1)
    assert re.findall(r"<td>([^<]*)</td>", row) == ["2", "1", "0"]
    assert re.search(rf'<rect [^>]*class="bar"><title>{NOW:%m-%d}: 2</title>', html)
    assert "Waited p50 (days)" in html and "Filled (vacancies)" in html


def test_the_pictures_are_kept_per_clinic_between_loads(staff_web, world, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.WAITLIST_READINESS_CACHE_SECONDS = 10
    url = reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})

    def series_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert staff_web.get(url).status_code == 200
        # The fill series (the ORM's grouped count, its ``exhausted`` column) and the fairness series.
        return sum('AS "exhausted"' in q["sql"] or ("generate_series" in q["sql"] and "waiting_since" in q["sql"])
                   for q in ctx.captured_queries)

    assert series_queries() == 2
    assert series_queries() == 0


def test_the_upkeep_card_counts_the_questions_by_outcome(staff_web, world):
    outcomes = [UpkeepOutcome.STILL_NEEDED, UpkeepOutcome.STILL_NEEDED, UpkeepOutcome.NOT_NEEDED,
                UpkeepOutcome.PAUSED, UpkeepOutcome.ASKED]
    for outcome in outcomes:
        entry = world.waiting()
        UpkeepAsk.objects.create(clinic=world.clinic, entry=entry, outcome=outcome, asked_at=NOW,
                                 answer_by=NOW + timedelta(days=3))
    html = staff_web.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    card = html.split('data-testid="upkeep"', 1)[1].split("</section>", 1)[0]
    found = dict(re.findall(r'data-upkeep="(\w+)">(\d+)<', card))
    assert found == {"ASKED": "1", "STILL_NEEDED": "2", "NOT_NEEDED": "1", "PAUSED": "1"}
    assert "Confirmed (still needed)" in card and "Withdrawn (not needed)" in card


def test_the_fairness_chart_draws_days_waited_as_a_line_and_shows_a_dash_for_days_without_bookings():
    from datetime import date

    from waitlist.figures.over_time import FairnessDay

    chart = fairness_chart([FairnessDay(date(2030, 11, 30), 0, None), FairnessDay(date(2030, 12, 1), 3, 20.0)])
    booked, waited = chart["panels"]
    assert booked.label == "Booked (patients)" and waited.label == "Waited p50 (days)"
    assert len(waited.dots) == 1 and waited.dots[0]["title"] == "12-01: 20" and waited.points
    assert [r["values"] for r in chart["table"]] == [["0", "—"], ["3", "20"]]
