"""axe-core on every console page at 1280 px and 390 px, with the detail panels and the ADMIN disclosures
open: no critical and no serious violation (issue 25 section 5). And the console by keyboard alone.

axe-core comes from ``axe-playwright-python`` (its bundled ``axe.min.js``, injected through the DevTools
protocol, so the console's CSP stays as it is). Run with ``pytest -m browser``.
"""

from __future__ import annotations

import re

import pytest

from tests.operations.browser_support import settle, shot, sign_in, sync_api
from tests.support.axe import blocking_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}

pytest.importorskip("axe_playwright_python.sync_playwright")


@pytest.fixture
def seeded(clinic, admin, staff):
    """One of everything the console shows (``console_seeded``), with a vacancy in staff review."""
    from tests.conftest import seoul
    from tests.operations.waitlist_helpers import console_seeded, review_vacancy, waitlist_world

    data = console_seeded(waitlist_world(clinic, staff), reviews=lambda w: review_vacancy(w, starts_at=seoul(5, 10)))
    return {**data, "admin": admin}


_blocking = blocking_violations


def _open_disclosures(page) -> None:
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")


def _open_panel(page, selector: str, panel_testid: str) -> None:
    page.locator(selector).first.click()
    sync_api.expect(page.get_by_test_id(panel_testid)).to_be_visible()


def _pages(data) -> list[tuple[str, str, str | None, str | None]]:
    """(name, path, row to click, the panel it opens) for every console page."""
    c = data["clinic"].ref
    return [
        ("overview", f"/console/c/{c}/", None, None),
        ("waitlist", f"/console/c/{c}/waitlist/", "#wl-queue-rows tr[data-detail-row] td a", "vacancy-detail"),
        ("vacancies", f"/console/c/{c}/waitlist/lists/vacancies/", "#list-rows tr[data-detail-row] td a",
         "vacancy-detail"),
        ("offers", f"/console/c/{c}/waitlist/lists/offers/", "#list-rows tr[data-detail-row] td a", "vacancy-detail"),
        ("entries", f"/console/c/{c}/waitlist/lists/entries/", None, None),
        ("reevaluation", f"/console/c/{c}/reevaluation/", "tr[data-detail-row] td a", None),
        ("finished-jobs", f"/console/c/{c}/reevaluation/finished/", None, None),
        ("controls", f"/console/c/{c}/controls/", None, None),
        ("front-desk", f"/console/c/{c}/desk/", None, None),
        ("audit", f"/console/c/{c}/audit/", None, None),
        ("ref-page", f"/console/c/{c}/ref/{data['entry'].ref}/", None, None),
        ("vacancy-page", f"/console/c/{c}/waitlist/vacancies/{data['offer'].vacancy.ref}/", None, None),
        ("job-page", f"/console/c/{c}/reevaluation/jobs/{data['job']}/", None, None),
        ("search-miss", "/console/search/?q=vac_nothing", None, None),
    ]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_every_console_page_has_no_critical_or_serious_axe_violation(open_page, seeded, viewport):
    page = open_page(viewport)
    sign_in(page, seeded["admin"].username)
    failures = []
    for name, path, row, panel in _pages(seeded):
        page.goto(path)
        settle(page)
        if row and page.locator(row).count():
            page.locator(row).first.click()
            settle(page)
            if panel:
                sync_api.expect(page.get_by_test_id(panel)).to_be_visible()
        _open_disclosures(page)
        failures += [f"{name} @ {viewport['width']}: {v}" for v in _blocking(page)]
    assert failures == [], "\n".join(failures)


def test_the_login_page_has_no_critical_or_serious_axe_violation(open_page):
    page = open_page(PHONE)
    page.goto("/console/login/")
    assert _blocking(page) == []


def test_slash_focuses_search_and_a_queue_row_opens_its_panel_by_keyboard(open_page, seeded):
    page = open_page(DESKTOP)
    sign_in(page, seeded["admin"].username)
    page.goto(f"/console/c/{seeded['clinic'].ref}/waitlist/")
    page.keyboard.press("/")
    sync_api.expect(page.get_by_test_id("search")).to_be_focused()
    page.keyboard.press("Escape")
    page.locator("#wl-queue-rows tr[data-detail-row] td a").first.focus()
    page.keyboard.press("Enter")
    panel = page.get_by_test_id("vacancy-detail")
    sync_api.expect(panel).to_be_visible()
    # A command by keyboard: Tab into the re-dispatch form of the no-candidate row's panel and submit it.
    page.goto(f"/console/c/{seeded['clinic'].ref}/waitlist/")
    row = page.locator("tr[data-kind='VACANCY_NO_CANDIDATE'] td a").first
    row.focus()
    page.keyboard.press("Enter")
    form = page.get_by_test_id("command-redispatch")
    sync_api.expect(form).to_be_visible()
    form.locator("textarea, input[name=reason]").first.focus()
    page.keyboard.type("checked the waiting list by phone")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    sync_api.expect(page.get_by_test_id("command-result")).to_contain_text("No candidate")
    sync_api.expect(page.get_by_test_id("no-candidate")).to_be_visible()
    shot(page, "waitlist-no-candidate-keyboard")
    assert page.errors == []


def test_a_destructive_command_sits_behind_a_disclosure_that_names_it(open_page, seeded):
    page = open_page(DESKTOP)
    sign_in(page, seeded["admin"].username)
    page.goto(f"/console/c/{seeded['clinic'].ref}/waitlist/vacancies/{seeded['offer'].vacancy.ref}/")
    withdraw = page.get_by_test_id("command-withdraw")
    sync_api.expect(withdraw.locator("button:has-text('Withdraw offer')")).to_be_hidden()
    withdraw.locator("summary").click()
    sync_api.expect(withdraw.locator("button:has-text('Withdraw offer')")).to_be_visible()
    sync_api.expect(withdraw).to_contain_text("the slot goes to the next candidate")


def test_at_phone_width_the_tab_bar_scrolls_and_tables_scroll_visibly(open_page, seeded):
    page = open_page(PHONE)
    sign_in(page, seeded["admin"].username)
    page.goto(f"/console/c/{seeded['clinic'].ref}/waitlist/")
    tabs = page.locator("nav.sections ul")
    assert tabs.evaluate("el => getComputedStyle(el).overflowX") in ("auto", "scroll")
    labels = page.locator("nav.sections li").all_inner_texts()
    assert all(len(label.strip()) > 2 for label in labels)  # no label squeezed to "Au"
    assert re.search("Audit", " ".join(labels))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
