"""Arbitrary JSON never produces a 500: every refusal is a typed 4xx."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.models import Appointment

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)

APPOINTMENT_KEYS = ["patient", "practitioner", "treatment", "resource", "starts_at", "status"]
PATIENT_KEYS = ["display_name", "email", "phone", "language", "crm_patient_ref"]


def shaped(keys):
    """Objects with the real field names and arbitrary values reach deeper than random keys."""
    return st.dictionaries(st.sampled_from(keys), json_values, max_size=len(keys))


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def assert_typed(response, allowed_success):
    assert response.status_code < 500, response.content
    if response.status_code not in allowed_success:
        assert 400 <= response.status_code < 500
        body = response.json()
        assert body["code"].isupper() and body["detail"]


@FUZZ
@given(body=json_values | shaped(APPOINTMENT_KEYS))
def test_appointment_create_answers_arbitrary_json_with_typed_errors(staff_client, clinic, body):
    before = Appointment.objects.count()
    response = staff_client.post(f"/api/v1/clinics/{clinic.ref}/appointments/", body, format="json")
    assert_typed(response, allowed_success={201})
    if response.status_code != 201:
        assert Appointment.objects.count() == before


@FUZZ
@given(body=json_values | shaped(PATIENT_KEYS))
def test_patient_create_answers_arbitrary_json_with_typed_errors(staff_client, clinic, body):
    response = staff_client.post(f"/api/v1/clinics/{clinic.ref}/patients/", body, format="json")
    assert_typed(response, allowed_success={201})


@FUZZ
@given(body=json_values | shaped(["reason", "expected_version"]))
def test_cancel_answers_arbitrary_json_with_typed_errors(staff_client, clinic, body):
    response = staff_client.post(f"/api/v1/clinics/{clinic.ref}/appointments/apt_x/cancel", body, format="json")
    assert_typed(response, allowed_success=set())


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"[1,2", b'{"a": NaN}', b"null", b"12"])
def test_raw_bodies_that_are_not_json_objects_get_400(staff_client, clinic, raw):
    response = staff_client.generic(
        "POST", f"/api/v1/clinics/{clinic.ref}/patients/", raw, content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"
