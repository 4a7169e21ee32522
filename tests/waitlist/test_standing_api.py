"""Standing acceptance over HTTP: grant and revoke on an entry, the entry shows it, a standing booking's offer says
so, and its release reopens the slot; foreign refs are 404 like missing ones."""

from __future__ import annotations

from tests.conftest import seoul, token_client
from tests.waitlist.loop_helpers import open_vacancy
from tests.worlds import waitlist_world
from waitlist import services
from waitlist.models import StandingAcceptance


def url(world, path):
    return f"/api/v1/clinics/{world.clinic.ref}/{path}"


def grant(api, world, entry, **body):
    return api.post(url(world, f"waitlist-entries/{entry.ref}/standing-acceptance"),
                    {"state": "GRANTED", **body}, format="json")


def test_a_grant_over_the_api_is_shown_on_the_entry(world, staff_api):
    entry = world.waiting()
    response = grant(staff_api, world, entry, min_notice_minutes=240)
    assert response.status_code == 200, response.content
    assert response.json()["standing_acceptance"]["state"] == "GRANTED"
    detail = staff_api.get(url(world, f"waitlist-entries/{entry.ref}")).json()
    assert detail["standing_acceptance"]["min_notice_minutes"] == 240
    assert detail["standing_acceptance"]["source"] == "API"


def test_staff_without_the_patients_word_get_a_validation_error_and_nothing_is_recorded(world, staff_api):
    entry = world.waiting()
    response = grant(staff_api, world, entry, source="STAFF")
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"
    assert not StandingAcceptance.objects.exists()


def test_a_foreign_entry_is_404_like_a_missing_one(world, staff_api):
    foreign = waitlist_world().waiting()
    assert grant(staff_api, world, foreign).status_code == 404
    assert grant(staff_api, world, type("E", (), {"ref": "wle_missing"})()).status_code == 404
    assert not StandingAcceptance.objects.exists()


def test_a_standing_booking_is_marked_on_its_offer_and_released_over_the_api(world, staff_api):
    entry = world.waiting()
    assert grant(staff_api, world, entry).status_code == 200
    vacancy = open_vacancy(world, seoul(3, 10))
    dispatched = staff_api.post(url(world, f"vacancies/{vacancy.ref}/dispatch")).json()
    assert dispatched["outcome"] == "BOOKED"
    offer = staff_api.get(url(world, f"offers/{dispatched['offer']}")).json()
    assert offer["standing"] is True and offer["release_until"] and offer["appointment"]
    released = staff_api.post(url(world, f"offers/{offer['ref']}/release"), {"reason": "patient phoned"},
                              format="json")
    assert released.status_code == 200, released.content
    assert released.json()["status"] == "WITHDRAWN" and released.json()["vacancy"]


def test_releasing_an_ordinary_offer_is_a_conflict(world, staff_api):
    world.waiting()
    vacancy = open_vacancy(world, seoul(3, 10))
    offer = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer
    response = staff_api.post(url(world, f"offers/{offer.ref}/release"), {"reason": "x"}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "NOT_STANDING"


def test_another_tenants_user_cannot_grant(world):
    entry = world.waiting()
    outsider = token_client(waitlist_world().staff)
    assert grant(outsider, world, entry).status_code == 404
