"""A patient joins from a phone (issue 40): the join page at 390 px, the code, the status page, then the offer's
claim page, booked; axe-core finds no serious or critical violation on any of the new pages (English and Korean).

Fixtures from browser_support (registered by tests/operations/conftest.py). Run with ``pytest -m browser``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.operations.browser_support import shot, sync_api
from tests.support.axe import blocking_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]
PHONE = {"width": 390, "height": 844}

pytest.importorskip("axe_playwright_python.sync_playwright")


def _next_tuesday_morning() -> datetime:
    now = datetime.now(ZoneInfo("Asia/Seoul"))
    day = now.date() + timedelta(days=(1 - now.weekday()) % 7 or 7)
    return datetime(day.year, day.month, day.day, 10, 0, tzinfo=ZoneInfo("Asia/Seoul"))


def _code() -> str:
    from django.core import mail

    from common.outbox import outbox_deliver_due

    outbox_deliver_due(worker="browser-test")
    return re.search(r"\b(\d{6})\b", mail.outbox[-1].body).group(1)


def test_a_patient_joins_on_a_phone_and_books_the_offered_time(open_page, world):
    from tests.waitlist.factories import decide
    from tests.waitlist.joining_helpers import open_joining
    from tests.waitlist.loop_helpers import open_vacancy
    from waitlist import services
    from waitlist.models import EntryStatus, WaitlistEntry
    from waitlist.offers.tokens import claim_token_make

    open_joining(world)
    page = open_page(PHONE)
    page.goto(f"/join/{world.clinic.ref}/?lang=ko")
    assert blocking_violations(page) == []
    page.goto(f"/join/{world.clinic.ref}/")
    assert blocking_violations(page) == []
    shot(page, "join-page-phone")
    page.get_by_label("Your name").fill("Park Seoyeon")
    page.get_by_label("E-mail (if you have no mobile phone)").fill("seoyeon@example.com")
    page.get_by_label("E-mails").check()
    for day in ("Sat", "Sun"):
        page.get_by_label(day, exact=True).uncheck()
    page.get_by_role("button", name="Send me a code").click()
    sync_api.expect(page.locator("h1")).to_have_text("Check your phone or e-mail")
    assert blocking_violations(page) == []
    page.get_by_label("Code").fill(_code())
    page.get_by_role("button", name="Join the waiting list").click()
    sync_api.expect(page.locator("h1")).to_have_text("Your place on the waiting list")
    sync_api.expect(page.locator(".band")).to_have_text("Near the front")
    assert blocking_violations(page) == []
    shot(page, "join-status-phone")

    entry = WaitlistEntry.objects.get(patient__email="seoyeon@example.com")
    decide(entry.patient)
    vacancy = open_vacancy(world, starts_at=_next_tuesday_morning())
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == entry.pk
    page.goto(f"/claim/{claim_token_make(result.offer)}/")
    page.get_by_test_id("accept").click()
    sync_api.expect(page.locator("h1")).to_have_text("Your appointment is confirmed")
    entry.refresh_from_db()
    assert entry.status == EntryStatus.BOOKED
    assert page.errors == []
