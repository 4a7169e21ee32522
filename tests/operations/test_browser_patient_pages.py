"""The patient pages in a real browser (issue 25 sections 4 and 5): axe-core on every one of them (the claim
page open, booked, declined, expired, expired with its time still free (issue 22's late accept) and withdrawn;
the "book me automatically" page; the opt-out page), in English and Korean, at 1280 px and 390 px, and on the
API docs page: no critical and no serious violation. Accept and decline by keyboard alone; the live countdown;
the decline reason's size and distance.

Fixtures from browser_support (registered by tests/operations/conftest.py). Run with ``pytest -m browser``.
"""

from __future__ import annotations

import pytest

from tests.operations.browser_support import shot, sync_api
from tests.support.axe import blocking_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}

pytest.importorskip("axe_playwright_python.sync_playwright")


_blocking = blocking_violations


@pytest.fixture
def patient_world(clinic, staff):
    from scheduling.services import display_name_set
    from tests.operations.waitlist_helpers import waitlist_world

    world = waitlist_world(clinic, staff)
    clinic.settings = {"contact": {"address": "123 Teheran-ro, Gangnam-gu, Seoul 06133", "phone": "+82 2-555-0100",
                                   "address_ko": "서울특별시 강남구 테헤란로 123 (06133)"}}
    clinic.save(update_fields=["settings"])
    display_name_set(clinic=clinic, kind="clinic", ref=clinic.ref, language="ko", name="강남 클리닉")
    display_name_set(clinic=clinic, kind="practitioner", ref=world.doctor.ref, language="ko", name="서지원 원장")
    display_name_set(clinic=clinic, kind="treatment", ref=world.treatment.ref, language="ko", name="물리치료")
    return world


def _slot(n: int):
    """The n-th slot on the entries' day (Dec. 3, 2030 in Seoul; the factories' windows cover it)."""
    from tests.conftest import seoul

    return seoul(3, 8 + n)


@pytest.fixture
def pages(patient_world):
    """A path per patient page, each for a Korean-speaking patient (``?lang=en`` switches)."""
    from tests.operations.waitlist_helpers import make_offer
    from waitlist import services
    from waitlist.models import Offer, OfferStatus
    from waitlist.offers.tokens import claim_token_make, optout_link, standing_link

    world = patient_world
    services.policy_publish(clinic=world.clinic, standing_acceptance=True)

    def offer(day: int):
        return make_offer(world, world.patient(language="ko"), starts_at=_slot(day))

    open_offer, booked, declined, expired, withdrawn = offer(1), offer(2), offer(3), offer(4), offer(5)
    late = offer(6)  # made before the others end (their entries then wait again), expired unanswered below
    services.offer_claim_and_book(offer=Offer.objects.select_related("clinic", "patient", "policy", "vacancy")
                                  .get(pk=booked.pk))
    services.offer_decline(clinic=world.clinic, offer_ref=declined.ref, reason="TIME_NOT_SUITABLE")
    Offer.objects.filter(pk=expired.pk).update(status=OfferStatus.EXPIRED)
    services.offer_withdraw(clinic=world.clinic, offer_ref=withdrawn.ref, actor=world.staff, reason="r")
    late = _expired_unanswered(late)
    entry = world.waiting(world.patient(language="ko"))
    return {
        "claim-late": f"/claim/{claim_token_make(late)}/",
        "claim-open": f"/claim/{claim_token_make(open_offer)}/",
        "claim-booked": f"/claim/{claim_token_make(booked)}/",
        "claim-declined": f"/claim/{claim_token_make(declined)}/",
        "claim-expired": f"/claim/{claim_token_make(expired)}/",
        "claim-withdrawn": f"/claim/{claim_token_make(withdrawn)}/",
        "claim-gone": "/claim/not-a-token/",
        "standing": "/standing/" + standing_link(entry).rsplit("/standing/", 1)[1],
        "optout": "/optout/" + optout_link(entry.patient).rsplit("/optout/", 1)[1],
    }


def _expired_unanswered(offer):
    """The offer's window ran out unanswered (the expiry job's own command): its time is still free."""
    from datetime import timedelta

    from django.utils import timezone

    from waitlist import services
    from waitlist.models import Offer

    Offer.objects.filter(pk=offer.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    return services.offer_expire(clinic=offer.clinic, offer_ref=offer.ref)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_every_patient_page_has_no_critical_or_serious_axe_violation(open_page, pages, viewport):
    page = open_page(viewport)
    failures = []
    for name, path in pages.items():
        for language in ("ko", "en"):
            page.goto(f"{path}?lang={language}")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            failures += [f"{name} {language} @ {viewport['width']}: {v}" for v in _blocking(page)]
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), (name, language)
    assert failures == [], "\n".join(failures)
    assert page.errors == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_the_api_docs_page_has_no_critical_or_serious_axe_violation(open_page, viewport):
    page = open_page(viewport)
    page.goto("/api/docs/")
    sync_api.expect(page.locator(".opblock-tag").first).to_be_visible()  # drawn from the schema it fetched
    failures = _blocking(page)
    page.locator(".opblock-summary").first.click()  # an operation opened: its parameters and responses
    sync_api.expect(page.locator(".opblock-body").first).to_be_visible()
    failures += [f"opened: {v}" for v in _blocking(page)]
    assert failures == [], "\n".join(failures)


def _tab_to(page, testid: str, limit: int = 20) -> None:
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.dataset.testid") == testid:
            return
    raise AssertionError(f"Tab never reached {testid}")


def test_accept_by_keyboard_alone(open_page, patient_world):
    from tests.operations.waitlist_helpers import make_offer
    from waitlist.offers.tokens import claim_token_make

    offer = make_offer(patient_world, patient_world.patient(language="en"), starts_at=_slot(1))
    page = open_page(PHONE)
    page.goto(f"/claim/{claim_token_make(offer)}/")
    _tab_to(page, "accept")
    page.keyboard.press("Enter")
    sync_api.expect(page.locator("h1")).to_have_text("Your appointment is confirmed")
    sync_api.expect(page.get_by_test_id("reference")).to_be_visible()
    sync_api.expect(page.get_by_test_id("calendar")).to_be_visible()
    sync_api.expect(page.get_by_test_id("change")).to_contain_text("+82 2-555-0100")
    shot(page, "patient-claim-accepted-keyboard")
    assert page.errors == []


def test_a_yes_after_the_window_takes_the_still_free_time_by_keyboard(open_page, patient_world):
    from tests.operations.waitlist_helpers import make_offer
    from waitlist.offers.tokens import claim_token_make

    offer = _expired_unanswered(make_offer(patient_world, patient_world.patient(language="en"), starts_at=_slot(1)))
    page = open_page(PHONE)
    page.goto(f"/claim/{claim_token_make(offer)}/")
    sync_api.expect(page.get_by_test_id("still-free")).to_be_visible()
    shot(page, "patient-claim-late-still-free-390")
    _tab_to(page, "accept-late")
    page.keyboard.press("Enter")
    sync_api.expect(page.locator("h1")).to_have_text("Your appointment is confirmed")
    sync_api.expect(page.get_by_test_id("reference")).to_be_visible()
    page.reload()  # the link now stands for the booking
    sync_api.expect(page.locator("h1")).to_have_text("Your appointment is confirmed")
    shot(page, "patient-claim-late-booked-390")
    assert page.errors == []


def test_decline_by_keyboard_alone_with_a_reason(open_page, patient_world):
    from tests.operations.waitlist_helpers import make_offer
    from waitlist.offers.tokens import claim_token_make

    offer = make_offer(patient_world, patient_world.patient(language="ko"), starts_at=_slot(1))
    page = open_page(PHONE)
    page.goto(f"/claim/{claim_token_make(offer)}/")
    _tab_to(page, "decline-ask")
    page.keyboard.press("Enter")  # opens the confirmation
    sync_api.expect(page.get_by_test_id("decline")).to_be_visible()
    _tab_to(page, "decline-reason", limit=3)
    page.keyboard.press("ArrowDown")  # the first reason (a closed select changes with the arrow keys)
    _tab_to(page, "decline", limit=3)
    page.keyboard.press("Enter")
    sync_api.expect(page.locator("h1")).to_have_text("이 시간을 거절하셨습니다")
    offer.refresh_from_db()
    assert offer.status == "DECLINED" and offer.decline_reason
    assert page.errors == []


def test_the_decline_reason_is_full_size_and_well_apart_from_the_decline_button(open_page, patient_world):
    from tests.operations.waitlist_helpers import make_offer
    from waitlist.offers.tokens import claim_token_make

    offer = make_offer(patient_world, patient_world.patient(language="en"), starts_at=_slot(1))
    for viewport in (PHONE, DESKTOP):
        page = open_page(viewport)
        page.goto(f"/claim/{claim_token_make(offer)}/")
        page.get_by_test_id("decline-ask").click()
        reason = page.get_by_test_id("decline-reason").bounding_box()
        button = page.get_by_test_id("decline").bounding_box()
        accept = page.get_by_test_id("accept").bounding_box()
        assert reason["height"] >= 44 and button["height"] >= 44 and accept["height"] >= 44
        assert reason["width"] >= 0.8 * button["width"]  # a full-width control, not a 19 px widget
        assert button["y"] - (reason["y"] + reason["height"]) >= 16  # well apart from the red button
        for link in page.locator("nav.lang a").all():
            assert link.bounding_box()["height"] >= 44
        shot(page, f"patient-claim-decline-open-{viewport['width']}")


def test_the_countdown_is_live_and_speaks_at_most_once_a_minute(open_page, patient_world):
    from tests.operations.waitlist_helpers import make_offer
    from waitlist import services
    from waitlist.offers.tokens import claim_token_make

    services.policy_publish(clinic=patient_world.clinic, answer_window="FIXED")  # 20 minutes (the hold)
    offer = make_offer(patient_world, patient_world.patient(language="en"), starts_at=_slot(1))
    page = open_page(PHONE)
    page.clock.install()
    page.goto(f"/claim/{claim_token_make(offer)}/")
    countdown = page.locator("[data-countdown]")
    status = page.locator("[data-countdown-status]")
    first = countdown.inner_text()
    assert first.endswith("min left") and status.get_attribute("role") == "status"
    minutes = int(first.split()[0])
    page.clock.run_for(61_000)
    sync_api.expect(countdown).to_have_text(f"{minutes - 1} min left")
    spoken = []
    for _ in range(minutes + 1):
        page.clock.run_for(60_000)
        text = status.inner_text()
        if text and (not spoken or spoken[-1] != text):
            spoken.append(text)
    sync_api.expect(countdown).to_contain_text("The time to answer has run out")
    # Milestones only (15, 10, 5, 2, 1 min, under a minute, the end), never every minute.
    assert len(spoken) <= 8 and spoken[-1].startswith("The time to answer has run out"), spoken
    korean = make_offer(patient_world, patient_world.patient(language="ko"), starts_at=_slot(2))
    page.goto(f"/claim/{claim_token_make(korean)}/")
    sync_api.expect(page.locator("[data-countdown]")).to_contain_text("분 남음")
    assert page.errors == []
