"""Issue 14 in a real browser: `/` to the console, search by ref, the lists with a filter, bulk review,
the trend chart, the loading indicator on a slow request, 1280 px without clipped columns, and the
claim page in Korean by Accept-Language. Screenshots: ``test-artifacts/screenshots/console-*.png``."""

from __future__ import annotations

import re

import pytest

from tests.operations.browser_support import shot, sign_in, sync_api

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def _offer(world, hour=10):
    from tests.conftest import seoul
    from tests.operations.waitlist_helpers import make_offer

    return make_offer(world, starts_at=seoul(4, hour))


def _reviews(world, n):
    from tests.operations.waitlist_helpers import bulk_reviews

    return bulk_reviews(world, n)


def _list(page, clinic, kind):
    path = "reevaluation/finished/" if kind == "jobs" else f"waitlist/lists/{kind}/"
    page.goto(f"/console/c/{clinic.ref}/{path}")


def test_the_site_root_leads_to_the_console(open_page, staff, clinic):
    page = open_page()
    page.goto("/")
    page.wait_for_url(re.compile(r"/console/login/\?next=/console/$"))
    sign_in(page, staff.username)
    page.goto("/")
    page.wait_for_url(re.compile(rf"/console/c/{clinic.ref}/$"))
    assert page.errors == []


def test_search_by_ref_opens_the_offers_vacancy_panel_and_a_foreign_ref_is_not_found(open_page, staff, world):
    from tests.worlds import waitlist_world

    offer = _offer(world)
    foreign = _offer(waitlist_world())
    page = open_page(DESKTOP)
    sign_in(page, staff.username)
    page.get_by_test_id("search").fill(offer.ref)
    page.get_by_test_id("search").press("Enter")
    sync_api.expect(page.get_by_test_id("vacancy-detail")).to_have_attribute("data-vacancy", offer.vacancy.ref)
    shot(page, "console-search-hit")
    page.get_by_test_id("search").fill(foreign.ref)
    page.get_by_test_id("search").press("Enter")
    sync_api.expect(page.get_by_test_id("search-result")).to_contain_text("Nothing found")
    assert foreign.vacancy.ref not in page.content()


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [("vacancies", "status", "REVIEW"), ("offers", "status", "ACTIVE"), ("entries", "status", "WAITING"),
     ("jobs", "status", "FAILED")],
)
def test_each_list_filters_in_place(open_page, staff, world, kind, field, value):
    from django.utils import timezone

    from reevaluation.models import JobState, ReevaluationJob
    from tests.reevaluation.factories import bulk_jobs

    offer = _offer(world)
    reviews = _reviews(world, 2)
    failed, completed = bulk_jobs(world.clinic, 2)
    ReevaluationJob.objects.filter(pk=failed.pk).update(state=JobState.FAILED, finished_at=timezone.now(),
                                                        last_failure_code="ASSESSMENT_TIMEOUT")
    ReevaluationJob.objects.filter(pk=completed.pk).update(state=JobState.COMPLETED, finished_at=timezone.now())
    expected = {
        "vacancies": {v.ref for v in reviews}, "offers": {offer.ref},
        "entries": {r.review_entry.ref for r in reviews}, "jobs": {failed.ref},
    }[kind]
    page = open_page(DESKTOP)
    sign_in(page, staff.username)
    _list(page, world.clinic, kind)
    page.select_option(f"#id_{field}", value)
    page.get_by_test_id("list-filters").locator("button[type=submit]").click()
    rows = page.locator("#list-rows tr[data-ref]")
    sync_api.expect(rows).to_have_count(len(expected))
    assert {rows.nth(i).get_attribute("data-ref") for i in range(len(expected))} == expected
    page.wait_for_url(re.compile(rf".*{field}={value}"))  # the filter is in the address (shareable, back button)
    shot(page, f"console-list-{kind}")
    if kind in ("vacancies", "offers"):  # a row opens the vacancy panel with its history
        rows.first.locator("td").nth(2).click()
        sync_api.expect(page.get_by_test_id("vacancy-detail")).to_be_visible()
    assert page.errors == []


def test_bulk_review_of_three_vacancies(open_page, staff, world):
    from common.models import AuditEntry
    from waitlist.models import Offer

    reviews = _reviews(world, 3)
    page = open_page(DESKTOP)
    sign_in(page, staff.username)
    page.goto(f"/console/c/{world.clinic.ref}/waitlist/lists/vacancies/?status=REVIEW")
    for vacancy in reviews:
        page.locator(f"input[data-testid=bulk-select][value='{vacancy.ref}']").check()
    page.select_option("#bulk-resolution", "PROMOTE")
    page.fill("#bulk-reason", "decisions re-checked with the clinic")
    page.get_by_test_id("bulk-summary-button").click()
    summary = page.get_by_test_id("bulk-summary")
    sync_api.expect(summary.locator("li[data-ref]")).to_have_count(3)
    assert not Offer.objects.exists()  # nothing changed before confirming
    shot(page, "console-bulk-summary")
    page.get_by_test_id("bulk-confirm-button").click()
    results = page.get_by_test_id("bulk-results")
    sync_api.expect(results.locator("tr[data-ok=true]")).to_have_count(3)
    sync_api.expect(page.get_by_test_id("toast").first).to_contain_text("Reviewed 3 of 3")
    # The list refreshed itself: no vacancy is in review any more.
    sync_api.expect(page.locator("#list-rows tr[data-ref]")).to_have_count(0)
    assert AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve").count() == 3
    shot(page, "console-bulk-results")
    assert page.errors == []


def test_the_overview_shows_counters_and_the_trend_chart(open_page, staff, world):
    _offer(world)
    page = open_page(DESKTOP)
    sign_in(page, staff.username)
    chart = page.get_by_test_id("trend-chart")
    sync_api.expect(chart.locator("svg")).to_be_visible()
    sync_api.expect(chart.locator("g[data-series]")).to_have_count(3)
    assert chart.locator("svg").bounding_box()["width"] > 300
    sync_api.expect(page.locator("[data-counter=offers] dd")).to_have_text("1")
    shot(page, "console-overview")
    assert page.errors == []


def test_a_slow_request_shows_progress_and_disables_its_button(open_page, staff, world):
    _reviews(world, 1)
    page = open_page(DESKTOP)
    sign_in(page, staff.username)
    _list(page, world.clinic, "vacancies")
    held = []
    page.route(re.compile(r".*/waitlist/lists/vacancies/\?status=REVIEW.*"), lambda route: held.append(route))
    page.select_option("#id_status", "REVIEW")
    button = page.get_by_test_id("list-filters").locator("button[type=submit]")
    button.click()
    sync_api.expect(page.locator("#list-loading")).to_be_visible()
    sync_api.expect(button).to_be_disabled()
    assert page.evaluate("document.documentElement.classList.contains('busy')")
    shot(page, "console-loading")
    page.wait_for_timeout(50)
    assert held, "the filter request was not intercepted"
    held[0].continue_()
    sync_api.expect(page.locator("#list-loading")).to_be_hidden()
    sync_api.expect(button).to_be_enabled()
    sync_api.expect(page.locator("#list-rows tr[data-ref]")).to_have_count(1)


WIDTH_CHECK = """() => Array.from(document.querySelectorAll('table')).map(t => {
  const wrap = t.closest('.table-wrap') || t.parentElement;
  const cells = Array.from(t.querySelectorAll('th, td'));
  return {
    id: t.className,
    table: t.scrollWidth, frame: wrap.clientWidth,
    columns: Array.from(t.querySelectorAll('thead th')).map(h => h.textContent.trim() + ':' + h.offsetWidth),
    clipped: cells.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.trim().slice(0, 40)),
  };
})"""


def test_at_1280_px_no_table_overflows_or_clips_a_column(open_page, staff, world):
    from django.utils import timezone

    from reevaluation.models import JobState, QuarantineCase, ReevaluationJob
    from tests.operations.conftest import make_audit
    from tests.reevaluation.factories import bulk_jobs

    _offer(world)
    _reviews(world, 2)
    jobs = bulk_jobs(world.clinic, 3)
    ReevaluationJob.objects.filter(pk__in=[j.pk for j in jobs]).update(
        state=JobState.FAILED, finished_at=timezone.now(), last_failure_code="ASSESSMENT_HASH_MISMATCH",
        outcome_counts={"HOLD_KEPT": 2, "FALLBACK_TO_PROPOSED": 1, "PROPOSAL_SUPERSEDED": 3},
    )
    QuarantineCase.objects.create(reason_code="ASSESSMENT_HASH_MISMATCH", category="INTEGRITY", source="ASSESSMENT",
                                  evidence_digest="ab" * 32, clinic=world.clinic,
                                  tenant_group=world.clinic.tenant_group, job=jobs[0])
    make_audit(world.clinic, 3, result={"status": "WITHDRAWN", "offer": "off_" + "x" * 16, "n": 1})
    page = open_page(DESKTOP)
    sign_in(page, staff.username)
    paths = ["waitlist/", "waitlist/lists/vacancies/", "waitlist/lists/offers/", "waitlist/lists/entries/",
             "reevaluation/", "reevaluation/finished/", "audit/"]
    for path in paths:
        page.goto(f"/console/c/{world.clinic.ref}/{path}")
        for table in page.evaluate(WIDTH_CHECK):
            assert table["table"] <= table["frame"], (path, table)
            assert table["clipped"] == [], (path, table)
        assert page.evaluate("document.documentElement.scrollWidth") <= DESKTOP["width"], path


def test_the_claim_page_speaks_korean_by_accept_language(browser, live_server, world):
    from scheduling.models import Patient
    from tests.conftest import seoul
    from tests.operations.waitlist_helpers import make_offer
    from waitlist.offers.tokens import claim_token_make

    patient = world.patient()
    Patient.objects.filter(pk=patient.pk).update(language="")  # no stored language: the browser decides
    offer = make_offer(world, patient, starts_at=seoul(4, 10))
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, locale="ko-KR",
                                  extra_http_headers={"Accept-Language": "ko-KR,ko;q=0.9"})
    try:
        page = context.new_page()
        page.goto(f"/claim/{claim_token_make(offer)}/")
        sync_api.expect(page.locator("html")).to_have_attribute("lang", "ko")
        sync_api.expect(page.locator("h1")).to_have_text("예약 가능한 시간이 생겼습니다")
        sync_api.expect(page.locator(".zone").first).to_have_text("(서울 시간)")
        assert page.evaluate("getComputedStyle(document.querySelector('h1')).wordBreak") == "keep-all"
        sync_api.expect(page.locator("a[hreflang=en]")).to_have_text("English")
        page.get_by_test_id("decline-ask").click()
        sync_api.expect(page.locator("button[value=decline]")).to_be_visible()
        shot(page, "console-claim-ko-phone")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        context.close()


PHONE_FIT = """() => {
  const wide = el => el.getBoundingClientRect().right > document.documentElement.clientWidth + 1;
  return {
    page: document.documentElement.scrollWidth,
    overflowing: Array.from(document.querySelectorAll('main input, main select, main textarea, main button, main td'))
      .filter(wide).map(el => el.tagName + ':' + (el.name || el.textContent.trim().slice(0, 30))),
  };
}"""


def test_at_390_px_controls_audit_and_list_filters_fit_the_phone(open_page, admin, world):
    """Phone: ADMIN forms stay inside their card, audit rows and policy fields become cards, filters pair up."""
    from tests.operations.conftest import make_audit

    make_audit(world.clinic, 2, result={"from": "APPLY_PROPOSED", "to": "APPLY_PROPOSED_AND_HELD"})
    page = open_page(PHONE)
    sign_in(page, admin.username)
    for path in ("controls/", "audit/", "waitlist/lists/vacancies/"):
        page.goto(f"/console/c/{world.clinic.ref}/{path}")
        fit = page.evaluate(PHONE_FIT)
        assert fit == {"page": PHONE["width"], "overflowing": []}, (path, fit)
    page.goto(f"/console/c/{world.clinic.ref}/controls/")
    assert page.locator("form[data-testid=reason-confirm]").count() >= 2
    shot(page, "console-controls-phone")


def test_at_390_px_the_trend_chart_panel_names_are_readable(open_page, staff, world):
    page = open_page(PHONE)
    sign_in(page, staff.username)
    heights = page.evaluate("Array.from(document.querySelectorAll('.trend .axis'))"
                            ".map(t => t.getBoundingClientRect().height)")
    assert heights and min(heights) >= 9, heights
