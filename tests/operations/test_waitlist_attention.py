"""Every slot that needs a person is in the waitlist's action queue with its reasons (issue 25, section 1),
and the panel traces where a vacancy came from and the appointment it produced (section 2)."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from tests.conftest import seoul
from tests.operations.waitlist_helpers import make_offer
from tests.waitlist.loop_helpers import open_vacancy
from waitlist import services
from waitlist.models import Offer, Vacancy

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]
HX = {"HTTP_HX_REQUEST": "true"}


def _page(web, clinic) -> str:
    return web.get(reverse("console:waitlist", kwargs={"clinic_ref": clinic.ref})).content.decode()


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def _no_candidate(world) -> Vacancy:
    world.waiting(world.patient(consent=False))
    vacancy = open_vacancy(world, seoul(3, 10))
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "NO_CANDIDATE"
    return vacancy


def test_a_vacancy_with_no_candidate_is_in_the_queue_with_its_reasons(staff_web, world):
    vacancy = _no_candidate(world)
    html = _page(staff_web, world.clinic)
    row = re.search(rf'<tr data-queue-ref="{vacancy.ref}" data-kind="VACANCY_NO_CANDIDATE".*?</tr>', html, re.S)
    assert row is not None
    assert "1 × No consent to contact" in _text(row.group(0)) and 'data-command="redispatch"' in row.group(0)
    assert "Nothing needs attention" not in html


def test_a_vacancy_waiting_on_quiet_hours_past_its_lead_time_is_in_the_queue(staff_web, world):
    vacancy = open_vacancy(world, seoul(3, 10))
    Vacancy.objects.filter(pk=vacancy.pk).update(waiting_reason="QUIET_HOURS", waiting_until=seoul(3, 9, 30))
    html = _page(staff_web, world.clinic)
    assert re.search(rf'<tr data-queue-ref="{vacancy.ref}" data-kind="VACANCY_WAITING"', html)
    assert "Quiet hours" in html


def test_a_vacancy_waiting_with_lead_time_to_spare_is_not_in_the_queue(staff_web, world):
    vacancy = open_vacancy(world, seoul(3, 10))
    Vacancy.objects.filter(pk=vacancy.pk).update(waiting_reason="QUIET_HOURS", waiting_until=seoul(2, 8))
    assert f'data-queue-ref="{vacancy.ref}"' not in _page(staff_web, world.clinic)


def test_redispatch_with_no_candidate_is_a_warning_naming_the_reasons(staff_web, world):
    vacancy = _no_candidate(world)
    response = staff_web.post(
        reverse("console:waitlist-redispatch", kwargs={"clinic_ref": world.clinic.ref, "vacancy_ref": vacancy.ref}),
        {"reason": "checked the list again", "confirm": "on", "idempotency_key": "k-nc"}, **HX)
    toast = json.loads(response["HX-Trigger"])["console-toast"]
    assert toast["level"] == "warning"
    assert "No candidate (NO_CANDIDATE)" in toast["message"] and "1 × No consent to contact" in toast["message"]
    assert 'data-testid="no-candidate"' in response.content.decode()


def test_the_waitlist_page_links_to_the_lists_and_shows_todays_and_tomorrows_vacancies(staff_web, world):
    tomorrow = open_vacancy(world, seoul(2, 10))
    later = open_vacancy(world, seoul(5, 10))
    html = _page(staff_web, world.clinic)
    links = re.search(r'data-testid="wl-links">(.*?)</nav>', html, re.S).group(1)
    assert "/lists/vacancies/" in links and "/lists/offers/" in links and "/lists/entries/" in links
    soon = re.search(r'data-testid="soon-vacancies">(.*?)</section>', html, re.S).group(1)
    assert tomorrow.ref in soon and "Tomorrow" in soon and later.ref not in soon


def test_the_panel_links_a_filled_vacancy_to_its_appointment_and_its_cancelled_source(staff_web, world):
    offer = make_offer(world)
    page_offer = Offer.objects.select_related("clinic", "patient", "policy", "vacancy").get(pk=offer.pk)
    assert services.offer_claim_and_book(offer=page_offer).booked
    offer.refresh_from_db()
    appointment = offer.hold.appointment
    html = staff_web.get(reverse("console:waitlist-vacancy", kwargs={
        "clinic_ref": world.clinic.ref, "vacancy_ref": offer.vacancy.ref}), **HX).content.decode()
    booked = re.search(r'data-testid="booked-appointment">(.*?)</dd>', html, re.S).group(1)
    assert appointment.ref in booked and "/ref/" in booked
    source = re.search(r'data-testid="source-appointment">(.*?)</dd>', html, re.S).group(1)
    assert offer.vacancy.source_appointment.ref in source and "reason: cancelled" in source
