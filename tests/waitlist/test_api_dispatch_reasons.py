"""The API says why a vacancy has no offer: pass-over counts by reason, the waiting reason and until when."""

from __future__ import annotations

import pytest

from tests.conftest import seoul
from tests.waitlist.loop_helpers import open_vacancy

pytestmark = pytest.mark.django_db


def test_dispatch_with_no_candidate_answers_the_pass_over_counts(world, staff_api):
    world.waiting(world.patient(consent=False))
    world.waiting(world.patient(consent=False))
    vacancy = open_vacancy(world, seoul(3, 10))
    body = staff_api.post(f"/api/v1/clinics/{world.clinic.ref}/vacancies/{vacancy.ref}/dispatch").json()
    assert body["outcome"] == "NO_CANDIDATE"
    assert body["reasons"]["passed_over"] == [{"reason_code": "NO_CONTACT_CONSENT", "entries": 2, "until": None}]
    assert body["reasons"]["candidates_read"] == 2 and body["reasons"]["exhausted_at"]


def test_vacancy_detail_carries_the_reasons_of_its_last_dispatch(world, staff_api):
    world.waiting(world.patient(consent=False))
    vacancy = open_vacancy(world, seoul(3, 10))
    staff_api.post(f"/api/v1/clinics/{world.clinic.ref}/vacancies/{vacancy.ref}/dispatch")
    body = staff_api.get(f"/api/v1/clinics/{world.clinic.ref}/vacancies/{vacancy.ref}").json()
    assert body["reasons"]["passed_over"][0]["reason_code"] == "NO_CONTACT_CONSENT"
    assert body["reasons"]["waiting"] is None


def test_an_offered_dispatch_has_no_pass_overs(world, staff_api):
    world.waiting()
    vacancy = open_vacancy(world, seoul(3, 10))
    body = staff_api.post(f"/api/v1/clinics/{world.clinic.ref}/vacancies/{vacancy.ref}/dispatch").json()
    assert body["outcome"] == "OFFERED" and body["reasons"]["passed_over"] == []
