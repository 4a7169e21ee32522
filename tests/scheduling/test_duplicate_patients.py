"""One person is one patient in a clinic: the same email (any case), phone or CRM reference is refused with
409 PATIENT_DUPLICATE naming the existing ref, enforced by unique constraints (a race cannot get two in)."""

from __future__ import annotations

import pytest
from django.db import connections

from scheduling.models import Patient
from scheduling.services import patient_create
from tests import factories as f
from tests.conftest import race, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(clinic):
    from types import SimpleNamespace

    return SimpleNamespace(clinic=clinic)


def _create(client, clinic, key: str, **body):
    return client.post(f"/api/v1/clinics/{clinic.ref}/patients/", {"display_name": "P", "language": "en", **body},
                       format="json", HTTP_IDEMPOTENCY_KEY=key)


@pytest.mark.parametrize("second", [
    {"email": "MINA@patients.example"},
    {"phone": "+821055512345"},
    {"crm_patient_ref": "crm-77"},
])
def test_the_same_contact_or_crm_reference_twice_in_a_clinic_is_refused(world, staff_client, second):
    first = _create(staff_client, world.clinic, "a", email="mina@patients.example", phone="+821055512345",
                    crm_patient_ref="crm-77")
    assert first.status_code == 201
    response = _create(staff_client, world.clinic, "b", **second)
    assert response.status_code == 409 and response.json()["code"] == "PATIENT_DUPLICATE"
    assert response.json()["fields"]["existing"] == [first.json()["ref"]]
    assert Patient.objects.filter(clinic=world.clinic, display_name="P").count() == 1


def test_the_same_contact_in_another_clinic_is_another_patient(world, staff_client):
    other = f.ClinicFactory(tenant_group=world.clinic.tenant_group)
    patient_create(clinic=other, display_name="P", email="mina@patients.example")
    assert _create(staff_client, world.clinic, "a", email="mina@patients.example").status_code == 201


def test_patients_without_contacts_are_not_duplicates_of_each_other(world, staff_client):
    assert _create(staff_client, world.clinic, "a").status_code == 201
    assert _create(staff_client, world.clinic, "b").status_code == 201


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_racing_creates_with_one_email_make_one_patient():
    clinic = f.ClinicFactory()
    client_users = [f.user_with_role(clinic) for _ in range(4)]

    def create(i: int):
        try:
            return _create(token_client(client_users[i]), clinic, f"k{i}", email="same@patients.example").status_code
        finally:
            connections.close_all()

    codes = race(create, 4)
    assert sorted(codes) == [201, 409, 409, 409], codes
    assert Patient.objects.filter(clinic=clinic, email="same@patients.example").count() == 1
