"""Who cancelled an appointment and why (issue 25 section 2): the cancel API records a reason code and the
caller's actor ref (``api:<username>`` for a token, ``staff:<username>`` for a session), the EHR's cancellation
``integration:<username>``, a patient's release of an automatic booking ``patient:<patient ref>``; the console's
vacancy panel says "cancelled by … reason …" (refs and codes only)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from scheduling.models import Appointment, AppointmentStatus, CancelReason
from tests.conftest import seoul, token_client
from tests.waitlist.test_standing import booked
from waitlist import services
from waitlist.figures.panels import ops_vacancy_panel
from waitlist.models import Vacancy


def _cancel(client, world, appointment, body):
    return client.post(f"/api/v1/clinics/{world.clinic.ref}/appointments/{appointment.ref}/cancel", body,
                       format="json", HTTP_IDEMPOTENCY_KEY=f"cancel-{appointment.ref}-{sorted(body.items())}")


def test_the_cancel_api_records_the_reason_code_and_the_token_caller(world):
    appointment = world.confirmed(seoul(5, 11))
    response = _cancel(token_client(world.staff), world, appointment,
                       {"reason": "called in", "reason_code": "PATIENT_REQUEST"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["reason_code"], body["cancelled_by"]) == ("PATIENT_REQUEST", f"api:{world.staff.get_username()}")
    appointment.refresh_from_db()
    assert (appointment.cancel_reason_code, appointment.cancelled_by, appointment.cancel_reason) == (
        CancelReason.PATIENT_REQUEST, f"api:{world.staff.get_username()}", "called in")


def test_a_session_caller_is_staff_and_no_code_is_other(world):
    appointment = world.confirmed(seoul(5, 11))
    client = APIClient()
    client.force_authenticate(world.staff)
    response = _cancel(client, world, appointment, {"reason": "r"})
    assert response.status_code == 200, response.content
    assert response.json()["reason_code"] == "OTHER"
    assert response.json()["cancelled_by"] == f"staff:{world.staff.get_username()}"


@pytest.mark.parametrize("code", ["EHR_CANCELLED", "STANDING_RELEASED", "NOPE", 7])
def test_a_reason_code_callers_may_not_give_is_a_400_and_changes_nothing(world, code):
    appointment = world.confirmed(seoul(5, 11))
    response = _cancel(token_client(world.staff), world, appointment, {"reason": "r", "reason_code": code})
    assert response.status_code == 400 and "reason_code" in response.json()["fields"]
    row = Appointment.objects.get(pk=appointment.pk)
    assert (row.status, row.version, row.cancelled_by) == (AppointmentStatus.CONFIRMED, appointment.version, "")
    assert not Vacancy.objects.filter(clinic=world.clinic).exists()


def test_the_vacancy_panel_says_who_cancelled_and_why(world):
    appointment = world.confirmed(seoul(5, 11))
    assert _cancel(token_client(world.staff), world, appointment,
                   {"reason": "r", "reason_code": "PRACTITIONER_UNAVAILABLE"}).status_code == 200
    vacancy = Vacancy.objects.get(clinic=world.clinic, source_appointment=appointment)
    source = ops_vacancy_panel(clinic=world.clinic, vacancy_ref=vacancy.ref)["source_appointment"]
    assert (source["cancel_reason_code"], source["cancelled_by"]) == (
        "PRACTITIONER_UNAVAILABLE", f"api:{world.staff.get_username()}")
    web = Client()
    web.force_login(world.staff)
    html = web.get(reverse("console:waitlist-vacancy", args=[world.clinic.ref, vacancy.ref])).content.decode()
    assert f"cancelled by <code>api:{world.staff.get_username()}</code>" in html
    assert "Practitioner unavailable" in html
    page = web.get(reverse("console:ref", args=[world.clinic.ref, appointment.ref])).content.decode()
    assert "PRACTITIONER_UNAVAILABLE" in page and f"api:{world.staff.get_username()}" in page


def test_a_patients_release_of_an_automatic_booking_records_the_patient(world):
    entry = world.waiting()
    _vacancy, offer = booked(world, entry)
    services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=entry.patient)
    offer.hold.refresh_from_db()
    appointment = Appointment.objects.get(pk=offer.hold.appointment_id)
    assert (appointment.cancel_reason_code, appointment.cancelled_by) == (
        CancelReason.STANDING_RELEASED, f"patient:{entry.patient.ref}")


def test_a_staff_release_records_the_staff_user(world):
    entry = world.waiting()
    _vacancy, offer = booked(world, entry)
    services.standing_release(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="asked by phone")
    offer.hold.refresh_from_db()
    appointment = Appointment.objects.get(pk=offer.hold.appointment_id)
    assert appointment.cancelled_by == f"staff:{world.staff.get_username()}"
