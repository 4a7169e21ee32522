"""The waitlist console page and the patient claim page in a real browser (fixtures from browser_support via conftest).

Screenshots: ``test-artifacts/screenshots/waitlist-*.png``. Run with ``pytest -m browser``.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.operations.browser_support import TABLET, shot, sign_in, sync_api

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def rows(clinic, staff):
    """A stuck booking (ACCEPTED, not booked for an hour), a dead delivery and a vacancy in staff review."""
    from tests.conftest import seoul
    from tests.operations.waitlist_helpers import dead_delivery_offer, make_offer, review_vacancy, waitlist_world
    from waitlist import services
    from waitlist.models import Offer

    world = waitlist_world(clinic, staff)
    stuck = make_offer(world, starts_at=seoul(3, 10))
    services.offer_claim(clinic=clinic, offer_ref=stuck.ref, expected_version=1, request_booking=True)
    Offer.objects.filter(pk=stuck.pk).update(booking_requested_at=timezone.now() - timedelta(hours=1))
    dead = dead_delivery_offer(world, starts_at=seoul(4, 10))
    review, entry = review_vacancy(world, starts_at=seoul(5, 10))
    return {"stuck": stuck, "dead": dead, "review": review, "entry": entry}


def test_staff_reads_the_waitlist_queue_and_evidence_without_withdraw(open_page, staff, clinic, rows):
    page = open_page()
    sign_in(page, staff.username)
    page.click("nav.sections >> text=Waitlist")
    page.wait_for_url(re.compile(r"/waitlist/$"))
    sync_api.expect(page.get_by_test_id("flag-state")).to_have_text("On")
    queue = page.locator("#wl-queue-rows tr[data-queue-ref]")
    sync_api.expect(queue).to_have_count(3)
    review_row = page.locator(f"tr[data-queue-ref='{rows['review'].ref}']")
    sync_api.expect(review_row).to_contain_text("DECISION_STALE")
    sync_api.expect(review_row).to_contain_text(rows["entry"].ref)  # the ordering key's entry ref
    sync_api.expect(review_row).to_contain_text("✓ Date range")
    sync_api.expect(page.locator("[data-command=withdraw]")).to_have_count(0)
    sync_api.expect(page.locator("[data-command=retry_booking]")).to_have_count(1)
    shot(page, "waitlist-staff")
    # Clicking the row loads the vacancy panel (htmx, no navigation) with the evidence and the review form.
    review_row.locator("td").nth(2).click()
    panel = page.get_by_test_id("vacancy-detail")
    sync_api.expect(panel.get_by_test_id("review-evidence")).to_contain_text("STALE")
    sync_api.expect(panel.locator("button:has-text('Mark reviewed')")).to_have_count(1)
    assert page.url.endswith("/waitlist/")
    # The stuck booking's panel: retry booking, but no withdraw control for STAFF.
    page.locator(f"tr[data-queue-ref='{rows['stuck'].hold.ref}'] [data-command=retry_booking]").click()
    sync_api.expect(panel).to_have_attribute("data-vacancy", rows["stuck"].vacancy.ref)
    sync_api.expect(panel.locator("button:has-text('Retry booking')")).to_have_count(1)
    sync_api.expect(panel.locator("button:has-text('Withdraw offer')")).to_have_count(0)
    sync_api.expect(panel.get_by_test_id("admin-only")).to_be_visible()
    shot(page, "waitlist-staff-panel")
    assert page.errors == []


def test_admin_withdraws_a_stuck_offer_with_a_reason(open_page, admin, clinic, rows):
    from common.models import AuditEntry
    from waitlist.models import Offer, OfferStatus

    stuck = rows["stuck"]
    page = open_page()
    sign_in(page, admin.username)
    page.goto(f"/console/c/{clinic.ref}/waitlist/")
    row = page.locator(f"tr[data-queue-ref='{stuck.hold.ref}']")
    row.locator("[data-command=withdraw]").click()
    form = page.get_by_test_id("command-withdraw")
    sync_api.expect(form).to_contain_text(stuck.ref)
    page.fill("#withdraw_reason", "patient called: cannot come")
    page.check("#withdraw_confirm")
    shot(page, "waitlist-admin-withdraw-form")
    form.locator("button:has-text('Withdraw offer')").click()
    sync_api.expect(page.get_by_test_id("command-result")).to_contain_text("WITHDRAWN")
    sync_api.expect(page.get_by_test_id("toast").first).to_contain_text("WITHDRAWN")
    sync_api.expect(row).to_have_count(0)  # the queue refreshed itself: the stuck row is gone
    sync_api.expect(page.locator("#wl-queue-rows tr[data-queue-ref]")).to_have_count(2)
    assert Offer.objects.get(pk=stuck.pk).status == OfferStatus.WITHDRAWN
    assert AuditEntry.objects.get(action="waitlist.offer_withdraw").actor_id == admin.pk
    shot(page, "waitlist-admin-withdrawn")
    page.set_viewport_size(TABLET)
    shot(page, "waitlist-admin-tablet")
    assert page.evaluate("document.documentElement.scrollWidth") <= TABLET["width"]
    assert page.errors == []


def test_outsider_gets_404(open_page, outsider, clinic, rows):
    page = open_page()
    sign_in(page, outsider.username)
    response = page.goto(f"/console/c/{clinic.ref}/waitlist/")
    assert response.status == 404
    assert rows["review"].ref not in page.content() and "Gangnam Clinic" not in page.content()
    response = page.goto(f"/console/c/{clinic.ref}/waitlist/vacancies/{rows['review'].ref}/")
    assert response.status == 404
    shot(page, "waitlist-outsider-404")
    assert page.errors == []


def test_claim_page_on_a_phone(open_page, clinic, staff):
    from tests.conftest import seoul
    from tests.operations.waitlist_helpers import make_offer, waitlist_world
    from waitlist.offers.tokens import claim_token_make

    offer = make_offer(waitlist_world(clinic, staff), starts_at=seoul(3, 10))
    page = open_page(PHONE)
    page.goto(f"/claim/{claim_token_make(offer)}/")
    sync_api.expect(page.locator("h1")).to_be_visible()
    sync_api.expect(page.locator("button[value=accept]")).to_be_visible()
    shot(page, "waitlist-claim-phone")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert page.errors == []


def test_admin_promotes_the_shadow_policy_from_the_controls_page(open_page, admin, clinic):
    from common.models import AuditEntry
    from waitlist import services

    before = services.policy_current(clinic=clinic).version
    shadow = services.shadow_publish(clinic=clinic, actor=admin, reason="try a tighter cap",
                                     changes={"weekly_offer_cap": 1})
    page = open_page()
    sign_in(page, admin.username)
    page.goto(f"/console/c/{clinic.ref}/controls/")
    block = page.get_by_test_id("shadow-policy")
    sync_api.expect(block.get_by_test_id("shadow-status")).to_contain_text("Observing")
    status = block.get_by_test_id("shadow-status").locator("[data-code]")
    sync_api.expect(status).to_have_attribute("data-code", "SHADOW")
    sync_api.expect(block.get_by_test_id("shadow-preview")).to_contain_text("weekly_offer_cap")
    block.get_by_test_id("disclose-promote").locator("summary").click()
    page.fill("#shadow_promote_reason", "agreement reviewed with the team")
    page.check("#shadow_promote_confirm")
    shot(page, "controls-shadow-promote-form")
    block.locator("button:has-text('Promote')").click()
    sync_api.expect(page.get_by_test_id("toast").first).to_contain_text(f"policy version {before + 1}")
    sync_api.expect(page.get_by_test_id("shadow-status").locator("[data-code]")).to_have_attribute("data-code",
                                                                                                "PROMOTED")
    sync_api.expect(page.get_by_test_id("policy-version")).to_have_text(str(before + 1))
    sync_api.expect(page.locator("button:has-text('Promote')")).to_have_count(0)
    assert services.policy_current(clinic=clinic).weekly_offer_cap == 1
    assert AuditEntry.objects.get(action="waitlist.shadow_policy_promote", target_ref=shadow.ref).actor_id == admin.pk
    shot(page, "controls-shadow-promoted")
    assert page.errors == []
