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


def test_a_nul_byte_in_the_redrive_clinic_is_a_typed_400_at_the_parser(admin_client):
    response = admin_client.post(
        "/api/v1/ops/profile-reevaluation",
        {"clinic": "cl\x00x", "action": "PREVIEW", "reason": "r"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-nul",
    )
    assert_error(response, 400, "VALIDATION_ERROR")  # issue 26: refused before any lookup


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


# Issue 26 part 2: text PostgreSQL cannot store, calendar edges in lists and FHIR, every method.


def raw_post(client, path, raw: str, **extra):
    return client.generic("POST", path, raw, content_type="application/json", **extra)


@pytest.mark.parametrize("field", ["patient", "practitioner", "treatment", "status"])
def test_a_lone_surrogate_in_a_json_ref_or_choice_is_a_typed_400(staff_client, clinic, booking, field):
    import json

    body = booking("2030-12-03T10:00:00+09:00")
    body[field] = "\ud800"
    response = raw_post(staff_client, f"/api/v1/clinics/{clinic.ref}/appointments/", json.dumps(body))
    assert_error(response, 400, "VALIDATION_ERROR")
    assert field in response.json()["fields"]
    assert not Appointment.objects.exists()


def test_a_lone_surrogate_in_a_json_key_is_a_typed_400(staff_client, clinic):
    response = raw_post(staff_client, f"/api/v1/clinics/{clinic.ref}/appointments/", '{"\\udfff": 1}')
    assert_error(response, 400, "VALIDATION_ERROR")


def test_an_escaped_nul_in_a_nested_json_value_is_a_typed_400(admin_client, clinic):
    response = raw_post(
        admin_client, f"/api/v1/clinics/{clinic.ref}/waitlist/policy", '{"changes": {"a": ["\\u0000"]}}',
        HTTP_IDEMPOTENCY_KEY="k-nul-nested",
    )
    assert_error(response, 400, "VALIDATION_ERROR")
    assert "changes.a" in response.json()["fields"]


def test_a_nul_in_a_list_query_is_a_typed_400(staff_client, clinic):
    response = staff_client.get(f"/api/v1/clinics/{clinic.ref}/appointments/", {"after": "a\x00b"})
    assert_error(response, 400, "VALIDATION_ERROR")
    assert "after" in response.json()["fields"]


def test_a_nul_in_a_console_form_body_is_a_plain_400(admin, clinic):
    from django.test import Client

    client = Client()
    client.force_login(admin)
    response = client.post(f"/console/c/{clinic.ref}/controls/switch/", {"reason": "a\x00b"})
    assert response.status_code == 400 and b"NUL" in response.content


@pytest.mark.parametrize("path", ["appointments/", "waitlist-entries/"])
@pytest.mark.parametrize("day", ["9999-12-31", "0001-01-01"])
def test_a_calendar_edge_list_day_is_a_typed_400(staff_client, clinic, path, day):
    response = staff_client.get(f"/api/v1/clinics/{clinic.ref}/{path}", {"date": day})
    assert_error(response, 400, "VALIDATION_ERROR")
    assert "date" in response.json()["fields"]


@pytest.mark.parametrize("start", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_calendar_edge_fhir_search_start_is_a_typed_400(staff_client, clinic, start):
    response = staff_client.get(f"/api/v1/clinics/{clinic.ref}/fhir/Slot", {"start": start})
    assert response.status_code == 400, response.content


def test_a_calendar_edge_console_list_day_is_a_400(admin, clinic):
    from django.test import Client

    client = Client()
    client.force_login(admin)
    response = client.get(f"/console/c/{clinic.ref}/waitlist/lists/vacancies/", {"date": "9999-12-31"})
    assert response.status_code == 400


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "TRACE"])
def test_a_method_the_controls_view_lacks_is_a_typed_405(admin_client, clinic, method):
    response = admin_client.generic(method, f"/api/v1/clinics/{clinic.ref}/waitlist/controls")
    assert_error(response, 405, "METHOD_NOT_ALLOWED")


def test_options_on_the_api_docs_page_is_a_405(anon_client):
    assert anon_client.options("/api/docs/").status_code == 405


def test_a_bare_word_next_after_sign_in_goes_to_the_console(admin):
    from django.test import Client

    client = Client()
    client.force_login(admin)
    response = client.get("/console/login/", {"next": "9999-12-31"})
    assert response.status_code == 302 and response.url == "/console/"


def test_a_fhir_search_offset_postgresql_cannot_hold_is_answered(staff_client, clinic):
    """``-22:50`` is a valid ISO offset that PostgreSQL refuses (found by ``make fuzz``: a DataError, 500)."""
    path = f"/api/v1/clinics/{clinic.ref}/fhir/Appointment"
    response = staff_client.get(path, {"start": "2030-11-15T15:19:50-22:50"})
    assert response.status_code == 200, response.content
