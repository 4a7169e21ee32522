"""The front desk's morning, end to end in a real browser at 390 px, by keyboard: a cancellation arrives and the
live queue shows it within 10 s; staff cancel an appointment for a caller and see the offer go out; they take the
waiting patient's yes on the phone, find the booking by its short code and add another patient to the list.
axe-core finds nothing serious or critical on the pages on the way. Screenshots: ``desk-*.png``."""

from __future__ import annotations

import re

import pytest

from tests.operations.browser_support import shot, sign_in, sync_api
from tests.support.axe import blocking_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def dispatch_inline(monkeypatch):
    """The dispatch a cancellation queues runs at once after its commit (the worker's job, in the request)."""
    from waitlist import services, tasks

    monkeypatch.setattr(tasks.dispatch_vacancy, "delay",
                        lambda vacancy_id: services.vacancy_dispatch_by_id(vacancy_id=vacancy_id))


def _keyboard_fill(page, selector: str, text: str) -> None:
    page.focus(selector)
    page.keyboard.type(text)


def _axe(page, name: str) -> list[str]:
    return [f"{name}: {v}" for v in blocking_violations(page)]


# At 390 px, the width the issue names; the desk page at 1280 px is in test_browser_axe.py and the screenshots.
@pytest.mark.parametrize("viewport", [PHONE], ids=["390"])
def test_a_front_desk_morning_by_keyboard(open_page, clinic, staff, dispatch_inline, viewport, settings):
    from common.shortcodes import display_code
    from scheduling.models import Appointment, AppointmentStatus
    from tests.conftest import seoul
    from tests.waitlist.loop_helpers import open_vacancy
    from tests.worlds import waitlist_world
    from waitlist import services
    from waitlist.models import Offer, OfferStatus, WaitlistEntry

    world = waitlist_world(clinic, staff)
    waiting = world.waiting()  # the patient who will take the freed time
    caller = world.confirmed(seoul(4, 10))  # the patient who phones to cancel
    newcomer = world.patient()
    failures: list[str] = []

    settings.CONSOLE_LIVE_SECONDS = 2  # the page polls as configured (10 s unless set); 2 s keeps the wait short
    page = open_page(viewport)
    sign_in(page, staff.username)
    page.goto(f"/console/c/{clinic.ref}/waitlist/")
    sync_api.expect(page.get_by_test_id("live-note")).to_contain_text("every 2 s")
    failures += _axe(page, "waitlist")

    # A cancellation arrives (the EHR's): a slot nobody on the list can take. The open page shows it by itself.
    empty = open_vacancy(world, seoul(6, 10), treatment=world.other_treatment)
    services.vacancy_dispatch(clinic=clinic, vacancy_ref=empty.ref)
    sync_api.expect(page.locator(f"#wl-queue-rows tr[data-queue-ref='{empty.ref}']")).to_be_visible(timeout=6_000)
    sync_api.expect(page).to_have_title(re.compile(r"^\(1\) Waitlist"))
    shot(page, f"desk-queue-live-{viewport['width']}")

    # The caller cancels by phone: staff type the code the caller reads out.
    code = display_code(clinic, Appointment.objects.values_list("code", flat=True).get(pk=caller.pk))
    page.goto(f"/console/c/{clinic.ref}/desk/")
    failures += _axe(page, "desk")
    _keyboard_fill(page, "#desk-cancel_appointment", code)
    page.keyboard.press("Tab")  # the reason code: keep "Patient request"
    page.keyboard.press("Tab")
    page.keyboard.type("called to cancel")
    page.keyboard.press("Enter")
    result = page.get_by_test_id("desk-cancel").get_by_test_id("desk-result")
    sync_api.expect(result).to_contain_text(f"Appointment {code} is cancelled")
    assert Appointment.objects.get(pk=caller.pk).status == AppointmentStatus.CANCELLED

    # The offer went out to the waiting patient: the Waitlist page lists it in flight, with its code.
    offer = Offer.objects.get(entry=waiting, status=OfferStatus.OFFERED)
    offer_code = display_code(clinic, offer.code)
    page.goto(f"/console/c/{clinic.ref}/waitlist/")
    sync_api.expect(page.locator(f"tr[data-in-flight='{offer.ref}']")).to_contain_text(offer_code)
    failures += _axe(page, "waitlist with an offer")

    # The waiting patient phones to say yes.
    page.goto(f"/console/c/{clinic.ref}/desk/")
    _keyboard_fill(page, "#desk-accept_offer", offer_code)
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # "The patient said so on the phone"
    page.keyboard.press("Tab")
    page.keyboard.type("called back at 9:10")
    page.keyboard.press("Enter")
    accepted = page.get_by_test_id("desk-accept").get_by_test_id("desk-result")
    sync_api.expect(accepted).to_contain_text("accepted for the patient")
    booked = Appointment.objects.get(source_hold__offer=offer)
    booked_code = display_code(clinic, booked.code)
    sync_api.expect(accepted).to_contain_text(booked_code)
    shot(page, f"desk-accepted-{viewport['width']}")

    # Find the booking by its code from the search box ("/" focuses it).
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("/")
    page.keyboard.type(booked_code)
    page.keyboard.press("Enter")
    sync_api.expect(page.get_by_test_id("short-code")).to_have_text(booked_code)
    failures += _axe(page, "appointment page")

    # Add another patient to the waitlist.
    page.goto(f"/console/c/{clinic.ref}/desk/")
    _keyboard_fill(page, "#desk-entry_patient", newcomer.ref)
    page.select_option("#desk-entry_treatment", world.treatment.ref)
    page.fill("#desk-entry_earliest", "2030-12-03")
    page.fill("#desk-entry_latest", "2030-12-20")
    # When they can come, by keyboard: "Any time" is ticked until a day or part of the day is.
    sync_api.expect(page.locator("#desk-entry_any_time")).to_be_checked()
    for box in ("#desk-entry_days_0", "#desk-entry_parts_0"):  # Monday, morning
        page.focus(box)
        page.keyboard.press("Space")
    sync_api.expect(page.locator("#desk-entry_any_time")).not_to_be_checked()
    page.focus("#desk-entry_patient")
    page.keyboard.press("Enter")
    result = page.get_by_test_id("desk-entry").get_by_test_id("desk-result")
    sync_api.expect(result).to_contain_text("can come: Mon morning")
    from waitlist.joining.availability import mask_of

    assert WaitlistEntry.objects.get(patient=newcomer).availability == mask_of(["MON"], ["MORNING"])
    shot(page, f"desk-{viewport['width']}")
    failures += _axe(page, "desk after the session")
    assert failures == [], "\n".join(failures)
    assert page.errors == []
