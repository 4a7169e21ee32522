"""Phone numbers are stored and compared in E.164, read for the clinic's country; a number that is not one is
refused with 400 PHONE_INVALID and nothing is created."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from common.errors import PhoneInvalid
from scheduling.models import Patient
from scheduling.phones import clinic_region, country_for_timezone, normalize_phone
from tests import factories as f

pytestmark = pytest.mark.django_db


def _create(client, clinic, key: str, **body):
    return client.post(f"/api/v1/clinics/{clinic.ref}/patients/", {"display_name": "P", "language": "en", **body},
                       format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_local_number_is_read_in_the_clinics_country(clinic):
    assert normalize_phone("010-5551-2345", clinic) == "+821055512345"


def test_an_international_number_is_read_as_written_wherever_the_clinic_is(clinic):
    assert normalize_phone("+1 212-555-0123", clinic) == "+12125550123"


def test_the_clinics_country_wins_over_its_time_zone():
    clinic = f.ClinicFactory(timezone="Asia/Seoul", country="PT")
    assert normalize_phone("912 345 678", clinic) == "+351912345678"


def test_a_clinic_without_a_country_reads_numbers_in_its_time_zones_country():
    assert country_for_timezone("Europe/Lisbon") == "PT"
    assert clinic_region(f.ClinicFactory(timezone="Europe/London")) == "GB"


@pytest.mark.parametrize("raw", ["12", "+8210", "not a number", "010-0000"])
def test_a_number_that_is_not_one_is_refused(clinic, raw):
    with pytest.raises(PhoneInvalid) as caught:
        normalize_phone(raw, clinic)
    assert caught.value.code == "PHONE_INVALID" and caught.value.status_code == 400 and "phone" in caught.value.fields


def test_a_local_number_in_a_clinic_of_no_country_is_refused():
    with pytest.raises(PhoneInvalid):
        normalize_phone("010-5551-2345", f.ClinicFactory(timezone="UTC"))


def test_a_patient_is_stored_with_the_e164_number(clinic, staff_client):
    response = _create(staff_client, clinic, "a", phone="010-5551-2345")
    assert response.status_code == 201
    assert Patient.objects.get(ref=response.json()["ref"]).phone == "+821055512345"


def test_an_invalid_number_is_refused_at_entry_and_nothing_is_created(clinic, staff_client):
    response = _create(staff_client, clinic, "a", phone="010-12")
    assert response.status_code == 400 and response.json()["code"] == "PHONE_INVALID"
    assert not Patient.objects.filter(clinic=clinic).exists()


def test_one_number_typed_two_ways_is_one_person(clinic, staff_client):
    assert _create(staff_client, clinic, "a", phone="+82 10-5551-2345").status_code == 201
    response = _create(staff_client, clinic, "b", phone="01055512345")
    assert response.status_code == 409 and response.json()["code"] == "PATIENT_DUPLICATE"


def test_the_migration_rewrites_parseable_phones_and_leaves_the_rest():
    clinic = f.ClinicFactory(timezone="Asia/Seoul")
    type(clinic).objects.filter(pk=clinic.pk).update(country="")
    local = f.PatientFactory(clinic=clinic, phone="010-5551-2345")
    broken = f.PatientFactory(clinic=clinic, phone="12")
    twin = f.PatientFactory(clinic=clinic, phone="+821055512345 ")
    importlib.import_module("scheduling.migrations.0013_phones_e164").forwards(apps, None)
    clinic.refresh_from_db()
    phones = {p.pk: p.phone for p in Patient.objects.filter(clinic=clinic)}
    assert clinic.country == "KR"
    assert phones[broken.pk] == "12"
    # Both spell one number: the first read takes it, the other is left for staff to merge by hand.
    assert sorted([phones[local.pk], phones[twin.pk]]) in (
        sorted(["+821055512345", "+821055512345 "]), sorted(["+821055512345", "010-5551-2345"]))
