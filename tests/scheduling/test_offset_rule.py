"""Issue 43: every API date-time needs an offset, one rule (``common.bounds.parse_instant``) for the API, the
waitlist entries and FHIR searches. A naive value is a 400 naming the field and writes nothing: read as UTC
it booked a Lisbon patient an hour off, and a time in the spring-forward gap or the repeated autumn hour has
no single meaning without its offset."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from scheduling.models import Appointment
from tests import factories as f
from tests.conftest import token_client
from waitlist.models import WaitlistEntry

LISBON = "Europe/Lisbon"


@pytest.fixture
def lisbon(db):
    with time_machine.travel(datetime(2026, 12, 1, 9, tzinfo=UTC), tick=False):
        clinic = f.ClinicFactory(name="Lisbon Clinic", timezone=LISBON)
        from scheduling.models import Role

        yield {
            "clinic": clinic,
            "client": token_client(f.user_with_role(clinic, Role.STAFF, username="lisbon-staff")),
            "patient": f.PatientFactory(clinic=clinic),
            "practitioner": f.PractitionerFactory(clinic=clinic),
            "treatment": f.TreatmentFactory(clinic=clinic, duration_minutes=30),
        }


def book(world, starts_at: str):
    return world["client"].post(f"/api/v1/clinics/{world['clinic'].ref}/appointments/", {
        "patient": world["patient"].ref, "practitioner": world["practitioner"].ref,
        "treatment": world["treatment"].ref, "starts_at": starts_at, "status": "CONFIRMED"}, format="json")


@pytest.mark.parametrize("starts_at", [
    "2027-03-28T01:30:00",  # Lisbon's spring-forward gap: 01:00 WET jumps to 02:00 WEST, 01:30 never happens
    "2027-10-31T01:30:00",  # the autumn hour that happens twice
    "2027-06-01T10:00:00",  # an ordinary summer morning, still no offset
    "2027-06-01T10:00",
])
def test_a_naive_appointment_start_is_a_400_naming_the_field_and_books_nothing(lisbon, starts_at):
    response = book(lisbon, starts_at)
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "VALIDATION_ERROR" and list(body["fields"]) == ["starts_at"]
    assert "offset" in body["fields"]["starts_at"][0]
    assert not Appointment.objects.exists()


def test_an_appointment_start_with_an_offset_is_booked_at_that_instant(lisbon):
    response = book(lisbon, "2027-03-28T02:30:00+01:00")  # the first hour of summer time
    assert response.status_code == 201, response.json()
    assert response.json()["starts_at"] == "2027-03-28T02:30:00+01:00"
    assert Appointment.objects.get().starts_at == datetime(2027, 3, 28, 1, 30, tzinfo=UTC)


def test_a_naive_waitlist_window_is_a_400_naming_the_field(lisbon):
    response = lisbon["client"].post(f"/api/v1/clinics/{lisbon['clinic'].ref}/waitlist-entries/", {
        "patient": lisbon["patient"].ref, "treatment": lisbon["treatment"].ref,
        "earliest": "2027-03-28T01:30:00", "latest": "2027-03-29T00:00:00+01:00"}, format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["earliest"]
    assert not WaitlistEntry.objects.exists()


def test_a_naive_decision_expiry_is_a_400_naming_the_field(lisbon):
    from tests.waitlist.factories import integration_client

    response = integration_client(lisbon["clinic"]).post(f"/api/v1/clinics/{lisbon['clinic'].ref}/booking-decisions/", {
        "patient": lisbon["patient"].ref, "decision_ref": "d-1", "status": "FRESH",
        "expires_at": "2027-03-28T01:30:00"}, format="json")
    assert response.status_code == 400 and list(response.json()["fields"]) == ["expires_at"]
