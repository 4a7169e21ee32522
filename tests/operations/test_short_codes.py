"""Short human codes for appointments and offers: set by PostgreSQL on every insert, unambiguous characters,
unique within the clinic; shown in notices, on the claim page and the console, found by the search box."""

from __future__ import annotations

import re

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from common.shortcodes import ALPHABET, clinic_prefix, display_code, parse_code
from scheduling.models import Appointment, AppointmentStatus
from tests.conftest import seoul
from tests.operations.waitlist_helpers import make_offer
from tests.waitlist.loop_helpers import claim_path, page_client
from waitlist.models import Offer
from waitlist.notices.offer_notice import offer_notice_text

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]
HX = {"HTTP_HX_REQUEST": "true"}
CODE = re.compile(rf"^[{ALPHABET}]{{4,8}}$")


def stored_code(model, pk) -> str:
    return model.objects.filter(pk=pk).values_list("code", flat=True).get()


def test_every_new_appointment_gets_a_code_of_unambiguous_characters(world):
    codes = {stored_code(Appointment, world.confirmed(seoul(4, 8) + (seoul(1, 1) - seoul(1, 0)) * i).pk)
             for i in range(12)}
    assert len(codes) == 12 and all(CODE.match(c) for c in codes)
    assert not any(set(c) & set("01OIL") for c in codes)


def test_an_offer_made_by_dispatch_gets_a_code(world):
    offer = make_offer(world)
    assert CODE.match(stored_code(Offer, offer.pk))


def test_a_code_is_unique_within_its_clinic(world):
    first = world.confirmed(seoul(4, 8))
    second = world.confirmed(seoul(4, 9))
    with pytest.raises(IntegrityError), transaction.atomic():
        Appointment.objects.filter(pk=second.pk).update(code=stored_code(Appointment, first.pk))


def test_the_clinic_prefix_comes_from_its_settings_or_its_name(world):
    assert clinic_prefix(world.clinic) == "GC"  # "Gangnam Clinic"
    world.clinic.settings = {"code_prefix": "gn"}
    assert display_code(world.clinic, "4829") == "GN-4829"
    assert parse_code("gn-4829") == ("GN", "4829") and parse_code("4829") == ("", "4829")
    assert parse_code("010-1234-5678") is None and parse_code("Kim") is None


def test_the_offer_notice_gives_the_code_in_both_languages(world):
    offer = Offer.objects.select_related("clinic", "vacancy__practitioner", "vacancy__treatment").get(
        pk=make_offer(world).pk)
    code = display_code(world.clinic, offer.code)
    assert f"Code to give the clinic: {code}" in offer_notice_text(offer, "https://x/claim/t/", "en")[1]
    assert f"병원에 알려 주실 코드: {code}" in offer_notice_text(offer, "https://x/claim/t/", "ko")[1]


def test_the_claim_page_shows_the_code(world):
    offer = make_offer(world, world.patient(language="en"))
    html = page_client().get(claim_path(offer)).content.decode()
    assert f'data-testid="code">{display_code(world.clinic, stored_code(Offer, offer.pk))}<' in html


def test_the_search_box_finds_an_appointment_by_its_code(staff_web, world):
    appointment = world.confirmed(seoul(4, 8))
    code = display_code(world.clinic, stored_code(Appointment, appointment.pk))
    response = staff_web.get(reverse("console:search") + f"?q={code.lower()}")
    assert response.status_code == 302
    assert response["Location"] == reverse("console:ref", kwargs={"clinic_ref": world.clinic.ref,
                                                                  "ref": appointment.ref})
    page = staff_web.get(response["Location"]).content.decode()
    assert f'data-testid="short-code">{code}<' in page and 'data-testid="desk-cancel-link"' in page


def test_the_search_box_finds_an_offer_by_its_code_and_opens_its_vacancy(staff_web, world):
    offer = make_offer(world)
    code = display_code(world.clinic, stored_code(Offer, offer.pk))
    response = staff_web.get(reverse("console:search") + f"?q={code}")
    assert response["Location"] == reverse("console:waitlist-vacancy", kwargs={
        "clinic_ref": world.clinic.ref, "vacancy_ref": offer.vacancy.ref})
    panel = staff_web.get(response["Location"], **HX).content.decode()
    assert f'data-testid="offer-code">{code}<' in panel


def test_a_code_under_another_clinics_prefix_finds_nothing(staff_web, world):
    appointment = world.confirmed(seoul(4, 8))
    response = staff_web.get(reverse("console:search") + f"?q=ZZ-{stored_code(Appointment, appointment.pk)}")
    assert response.status_code == 404


def test_an_outsider_cannot_find_a_code(outsider_web, world):
    appointment = world.confirmed(seoul(4, 8))
    response = outsider_web.get(reverse("console:search") + f"?q={stored_code(Appointment, appointment.pk)}")
    assert response.status_code == 404


def test_the_front_desk_cancels_by_code(staff_web, world):
    appointment = world.confirmed(seoul(4, 8))
    code = display_code(world.clinic, stored_code(Appointment, appointment.pk))
    response = staff_web.post(reverse("console:desk-verb-cancel", kwargs={"clinic_ref": world.clinic.ref}),
                              {"idempotency_key": "k1", "appointment": code, "reason_code": "PATIENT_REQUEST",
                               "reason": "phoned"}, **HX)
    assert response.status_code == 200 and code in response.content.decode()
    assert Appointment.objects.get(pk=appointment.pk).status == AppointmentStatus.CANCELLED
