"""Regenerate the console's screenshots at 1280 px and 390 px: ``make screenshots``.

Skipped in the normal test run (it rewrites ``docs/screenshots/``). It loads the demo data
(``seed_demo``) into the test database, adds a day's worth of waitlist activity, signs in as the demo
ADMIN and photographs every console page, a panel, a bulk review summary and the claim page (open, booked, declined).
docs/console.md links the results.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest

from tests.operations.browser_support import sync_api

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_broker"),
    pytest.mark.skipif(not os.environ.get("CONSOLE_SCREENSHOTS"), reason="run with `make screenshots`"),
]
OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WIDTHS = {"1280": {"width": 1280, "height": 900}, "390": {"width": 390, "height": 844}}


def _activity(clinic, admin):
    """Offers, a fill, reviews, a dead delivery and audit rows on the demo's Gangnam clinic."""
    from django.utils import timezone

    from common.models import OutboxMessage, OutboxStatus
    from tests.operations.waitlist_helpers import bulk_reviews, make_offer
    from tests.worlds import WaitlistWorld
    from waitlist import services

    doctors = list(clinic.practitioners.order_by("pk"))
    treatments = list(clinic.treatments.order_by("pk"))
    world = WaitlistWorld(clinic=clinic, doctor=doctors[0], other_doctor=doctors[-1], treatment=treatments[0],
                  other_treatment=treatments[-1], staff=admin)
    from zoneinfo import ZoneInfo

    base = timezone.localtime(timezone.now(), ZoneInfo(clinic.timezone)).replace(hour=9, minute=0, second=0,
                                                                                 microsecond=0)
    start = base + timedelta(days=3)
    window = {"earliest": base, "latest": base + timedelta(days=10)}
    # A candidate policy in SHADOW first, so every dispatch below records whom it would have offered.
    services.shadow_publish(clinic=clinic, actor=admin, reason="try a shorter hold", changes={"hold_minutes": 10})
    filled = make_offer(world, starts_at=start, **window)
    receipt = services.offer_claim(clinic=clinic, offer_ref=filled.ref, expected_version=1)
    services.offer_book(clinic=clinic, hold_ref=receipt.hold_ref)
    make_offer(world, starts_at=start + timedelta(hours=2), **window)
    dead = make_offer(world, starts_at=start + timedelta(hours=4), **window)
    OutboxMessage.objects.filter(aggregate_ref=dead.ref).update(
        status=OutboxStatus.DEAD, last_error_code="SMTP_UNAVAILABLE", attempts=5)
    reviews = bulk_reviews(world, 3, start=40)
    services.vacancy_review_resolve(clinic=clinic, vacancy_ref=reviews[0].ref, actor=admin,
                                    reason="decision re-checked by phone", resolution="SKIP")
    # A slot nobody can take: its only candidate never agreed to be contacted (the queue's NO_CANDIDATE row).
    from tests.waitlist.loop_helpers import open_vacancy

    world.waiting(world.patient(consent=False), treatment=world.other_treatment, **window)
    empty = open_vacancy(world, start + timedelta(hours=6), treatment=world.other_treatment)
    services.vacancy_dispatch(clinic=clinic, vacancy_ref=empty.ref)
    return {"filled": filled, "reviews": reviews[1:], "empty": empty}


def _shoot(page, name: str, width: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(OUT / f"{name}-{width}.png"), full_page=True)


def test_regenerate_console_screenshots(browser, live_server):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from scheduling.demo import DEMO_USERS
    from scheduling.models import Clinic
    from waitlist import services
    from waitlist.models import Offer, OfferStatus
    from waitlist.offers.tokens import claim_token_make

    call_command("seed_demo", stdout=StringIO())
    clinic = Clinic.objects.get(ref="cl_demo_gangnam")
    made = _activity(clinic, get_user_model().objects.get(username="admin"))
    offer = made["filled"]
    claim_offer = Offer.objects.filter(clinic=clinic, status=OfferStatus.OFFERED).order_by("pk").first()
    c = f"/console/c/{clinic.ref}"
    pages = {
        "overview": f"{c}/",
        "waitlist": f"{c}/waitlist/",
        "vacancies": f"{c}/waitlist/lists/vacancies/",
        "offers": f"{c}/waitlist/lists/offers/?status=ACTIVE",
        "waiting-list": f"{c}/waitlist/lists/entries/?status=WAITING",
        "vacancy-panel": f"{c}/waitlist/vacancies/{offer.vacancy.ref}/",
        "no-candidate-panel": f"{c}/waitlist/vacancies/{made['empty'].ref}/",
        "entry-page": f"{c}/ref/{offer.entry.ref}/",
        "reevaluation": f"{c}/reevaluation/",
        "finished-jobs": f"{c}/reevaluation/finished/",
        "controls": f"{c}/controls/",
        "audit": f"{c}/audit/",
        "front-desk": f"{c}/desk/",
        "patient-access-log": f"{c}/patients/access-log/",
        "ref-page": f"/console/search/?q={offer.entry.ref}",
    }
    for width, viewport in WIDTHS.items():
        context = browser.new_context(base_url=live_server.url, viewport=viewport)
        page = context.new_page()
        page.goto("/console/login/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", DEMO_USERS["admin"][0])
        page.click("button:has-text('Sign in')")
        page.wait_for_url(re.compile(r"/console/c/"))
        for name, path in pages.items():
            page.goto(path)
            _shoot(page, name, width)
        page.goto(f"{c}/waitlist/lists/vacancies/?status=REVIEW")
        for vacancy in made["reviews"]:
            page.locator(f"input[data-testid=bulk-select][value='{vacancy.ref}']").check()
        page.fill("#bulk-reason", "decisions re-checked with the clinic")
        page.get_by_test_id("bulk-summary-button").click()
        sync_api.expect(page.get_by_test_id("bulk-summary")).to_be_visible()
        _shoot(page, "bulk-review-summary", width)
        context.close()
        for language in ("en", "ko"):
            claim = browser.new_context(base_url=live_server.url, viewport=viewport,
                                        extra_http_headers={"Accept-Language": language})
            claim_page = claim.new_page()
            claim_page.goto(f"/claim/{claim_token_make(claim_offer)}/?lang={language}")
            _shoot(claim_page, f"claim-{language}", width)
            claim_page.goto(f"/claim/{claim_token_make(offer)}/?lang={language}")  # booked: what and where
            _shoot(claim_page, f"claim-booked-{language}", width)
            claim.close()
    # Last, since it changes the console's rows: the page of an offer the patient declined.
    services.offer_decline(clinic=clinic, offer_ref=claim_offer.ref, reason="TIME_NOT_SUITABLE")
    for width, viewport in WIDTHS.items():
        for language in ("en", "ko"):
            claim = browser.new_context(base_url=live_server.url, viewport=viewport)
            claim_page = claim.new_page()
            claim_page.goto(f"/claim/{claim_token_make(claim_offer)}/?lang={language}")
            _shoot(claim_page, f"claim-declined-{language}", width)
            claim.close()
    assert len(list(OUT.glob("*.png"))) >= 2 * (len(pages) + 7)


def test_regenerate_patient_page_screenshots(browser, live_server):
    """The patient pages of a Korean-speaking demo patient, in both languages: the claim page with its decline
    confirmation open, an expired and a withdrawn link, "book me automatically" and the opt-out page."""
    from zoneinfo import ZoneInfo

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from scheduling.models import Clinic
    from tests.operations.waitlist_helpers import make_offer
    from tests.worlds import WaitlistWorld
    from waitlist import services
    from waitlist.models import Offer, OfferStatus
    from waitlist.offers.tokens import claim_token_make, optout_link, standing_link

    call_command("seed_demo", stdout=StringIO())
    clinic = Clinic.objects.get(ref="cl_demo_gangnam")
    admin = get_user_model().objects.get(username="admin")
    doctors, treatments = list(clinic.practitioners.order_by("pk")), list(clinic.treatments.order_by("pk"))
    world = WaitlistWorld(clinic=clinic, doctor=doctors[0], other_doctor=doctors[-1], treatment=treatments[0],
                          other_treatment=treatments[-1], staff=admin)
    base = timezone.localtime(timezone.now(), ZoneInfo(clinic.timezone)).replace(hour=9, minute=0, second=0,
                                                                                 microsecond=0)
    window = {"earliest": base, "latest": base + timedelta(days=10)}
    patients = [world.patient(language="ko") for _ in range(3)]  # the demo's own patients are on the list
    open_offer = make_offer(world, patients[0], starts_at=base + timedelta(days=4), **window)
    expired = make_offer(world, patients[1], starts_at=base + timedelta(days=4, hours=2), **window)
    Offer.objects.filter(pk=expired.pk).update(status=OfferStatus.EXPIRED)
    withdrawn = make_offer(world, patients[2], starts_at=base + timedelta(days=4, hours=4), **window)
    services.offer_withdraw(clinic=clinic, offer_ref=withdrawn.ref, actor=admin, reason="slot closed")
    paths = {
        "claim-decline-open": f"/claim/{claim_token_make(open_offer)}/",
        "claim-expired": f"/claim/{claim_token_make(expired)}/",
        "claim-withdrawn": f"/claim/{claim_token_make(withdrawn)}/",
        "standing": "/standing/" + standing_link(open_offer.entry).rsplit("/standing/", 1)[1],
        "optout": "/optout/" + optout_link(patients[0]).rsplit("/optout/", 1)[1],
    }
    for width, viewport in WIDTHS.items():
        for language in ("en", "ko"):
            context = browser.new_context(base_url=live_server.url, viewport=viewport)
            page = context.new_page()
            for name, path in paths.items():
                page.goto(f"{path}?lang={language}")
                if name == "claim-decline-open":
                    page.get_by_test_id("decline-ask").click()
                _shoot(page, f"{name}-{language}", width)
            context.close()
    assert all((OUT / f"{name}-{lang}-{w}.png").exists() for name in paths for lang in ("en", "ko") for w in WIDTHS)
