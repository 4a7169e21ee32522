"""Junk input never gets a 5xx: NUL bytes, deep nesting, calendar edges, absurd years, huge bodies."""

from __future__ import annotations

import pytest

from scheduling.models import Appointment
from tests.conftest import seoul


@pytest.fixture
def booking(clinic, practitioner, treatment, patient):
    def body(starts_at: str) -> dict:
        return {
            "patient": patient.ref,
            "practitioner": practitioner.ref,
            "treatment": treatment.ref,
            "starts_at": starts_at,
            "status": "CONFIRMED",
        }

    return body


def assert_error(response, status: int, code: str):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == code


@pytest.mark.parametrize("path", ["appointments/apt%00x", "waitlist-entries/w%00", "offers/o%00/claim"])
def test_a_nul_byte_in_a_url_ref_is_a_404(staff_client, clinic, path):
    response = staff_client.get(f"/api/v1/clinics/{clinic.ref}/{path}")
    assert response.status_code in (404, 405)
    if response.status_code == 404:
        assert_error(response, 404, "NOT_FOUND")


def test_a_nul_byte_in_the_clinic_url_ref_is_a_404(staff_client):
    assert_error(staff_client.get("/api/v1/clinics/cl%00x/appointments/apt_1"), 404, "NOT_FOUND")


def test_a_nul_byte_in_the_redrive_clinic_is_a_404(admin_client):
    response = admin_client.post(
        "/api/v1/ops/profile-reevaluation",
        {"clinic": "cl\x00x", "action": "PREVIEW", "reason": "r"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-nul",
    )
    assert_error(response, 404, "NOT_FOUND")


def test_a_nul_byte_in_a_query_parameter_is_typed(staff_client):
    response = staff_client.get("/api/v1/ops/profile-reevaluation", {"clinic": "cl\x00x"})
    assert response.status_code in (400, 404) and response.json()["code"] in ("VALIDATION_ERROR", "NOT_FOUND")


def test_deeply_nested_json_is_a_typed_400(staff_client, clinic):
    raw = b"[" * 100_000 + b"]" * 100_000
    response = staff_client.generic(
        "POST", f"/api/v1/clinics/{clinic.ref}/patients/", raw, content_type="application/json"
    )
    assert_error(response, 400, "VALIDATION_ERROR")


@pytest.mark.parametrize(
    "starts_at",
    [
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
        "0296-03-01T10:00:00+09:00",
        "8502-03-01T10:00:00+09:00",
    ],
)
def test_an_appointment_outside_the_booking_range_is_refused(staff_client, clinic, booking, starts_at):
    response = staff_client.post(f"/api/v1/clinics/{clinic.ref}/appointments/", booking(starts_at), format="json")
    assert_error(response, 400, "VALIDATION_ERROR")
    assert "starts_at" in response.json()["fields"]
    assert not Appointment.objects.exists()


def test_an_appointment_inside_the_booking_range_is_accepted(staff_client, clinic, booking):
    response = staff_client.post(
        f"/api/v1/clinics/{clinic.ref}/appointments/", booking(seoul(3, 10).isoformat()), format="json"
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "earliest, latest",
    [("9999-12-30", "9999-12-31"), ("0001-01-01", "0001-01-02"), ("0001-01-01T00:00:00+01:00", "2030-12-31")],
)
def test_calendar_edge_waitlist_windows_are_refused(staff_client, clinic, treatment, patient, earliest, latest):
    body = {"patient": patient.ref, "treatment": treatment.ref, "earliest": earliest, "latest": latest}
    response = staff_client.post(f"/api/v1/clinics/{clinic.ref}/waitlist-entries/", body, format="json")
    assert_error(response, 400, "VALIDATION_ERROR")


def test_a_body_over_the_upload_limit_is_a_typed_413(staff_client, clinic):
    raw = b'{"display_name": "' + b"x" * (3 * 1024 * 1024) + b'", "language": "en"}'
    response = staff_client.generic(
        "POST", f"/api/v1/clinics/{clinic.ref}/patients/", raw, content_type="application/json"
    )
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")



def test_a_decision_expiring_in_an_absurd_year_is_refused(clinic, patient):
    from tests.waitlist.factories import integration_client

    body = {"patient": patient.ref, "decision_ref": "d-1", "status": "FRESH", "expires_at": "8502-01-01T00:00:00Z"}
    response = integration_client(clinic).post(f"/api/v1/clinics/{clinic.ref}/booking-decisions/", body, format="json")
    assert_error(response, 400, "VALIDATION_ERROR")
    assert "expires_at" in response.json()["fields"]
