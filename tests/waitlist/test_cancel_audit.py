"""Every appointment cancellation is in the audit log (issue 44 §6): through the API (token and session), the EHR
(FHIR PUT cancelled) and the command itself; a refused cancellation writes none."""

from __future__ import annotations

import pytest
from django.test import Client

from common.models import AuditEntry
from scheduling.models import AppointmentStatus
from tests.conftest import seoul, token_client
from tests.interop.ehr import EHR_SYSTEM, appointment, ehr_client, put
from tests.interop.fhir_helpers import validated
from waitlist import services

pytestmark = pytest.mark.usefixtures("queued_dispatches")


def cancel_url(world, appointment) -> str:
    return f"/api/v1/clinics/{world.clinic.ref}/appointments/{appointment.ref}/cancel"


def cancel_audits(appointment):
    return list(AuditEntry.objects.filter(action="appointment.cancel", target_ref=appointment.ref))


def test_a_cancellation_through_the_api_is_audited_with_who_why_and_the_vacancy(world):
    booked = world.confirmed(seoul(3, 10))
    response = token_client(world.staff).post(
        cancel_url(world, booked), {"reason": "patient called", "reason_code": "PATIENT_REQUEST"}, format="json",
        HTTP_IDEMPOTENCY_KEY="cancel-1")
    assert response.status_code == 200, response.content
    (audit,) = cancel_audits(booked)
    assert audit.actor == world.staff and audit.clinic_ref == world.clinic.ref
    assert audit.reason == "patient called" and audit.idempotency_key == "cancel-1"
    assert audit.result["status"] == AppointmentStatus.CANCELLED
    assert audit.result["previous_status"] == AppointmentStatus.CONFIRMED
    assert audit.result["reason_code"] == "PATIENT_REQUEST"
    assert audit.result["cancelled_by"] == f"api:{world.staff.get_username()}"
    assert audit.result["vacancy"] == response.json()["vacancy"] and audit.result["vacancy"]


def test_a_cancellation_by_a_signed_in_session_is_audited(world):
    booked = world.confirmed(seoul(3, 10))
    web = Client()
    web.force_login(world.staff)
    response = web.post(cancel_url(world, booked), {"reason": "front desk"}, content_type="application/json")
    assert response.status_code == 200, response.content
    (audit,) = cancel_audits(booked)
    assert audit.actor == world.staff and audit.result["cancelled_by"].startswith("staff:")


def test_a_refused_cancellation_writes_no_audit_row(world):
    booked = world.confirmed(seoul(3, 10))
    response = token_client(world.staff).post(cancel_url(world, booked), {"reason": "x", "expected_version": 7},
                                              format="json")
    assert response.status_code == 409
    assert not cancel_audits(booked)


def test_a_cancellation_from_the_ehr_is_audited(world):
    ehr = ehr_client(world.clinic)
    patient = world.patient()
    ident = f"{EHR_SYSTEM}|A-2001"
    validated(put(ehr, world.clinic, ident, appointment(world, patient, seoul(5, 11))), 201)
    validated(put(ehr, world.clinic, ident, appointment(world, patient, seoul(5, 11), status="cancelled")))
    booked = patient.appointments.get()
    (audit,) = cancel_audits(booked)
    assert audit.result["reason_code"] == "EHR_CANCELLED" and audit.result["cancelled_by"].startswith("integration:")
    assert audit.actor is not None  # the integration's user


def test_a_cancellation_by_the_command_without_a_user_is_audited_as_the_system(world):
    booked = world.confirmed(seoul(3, 10))
    services.appointment_cancel_with_vacancy(clinic=world.clinic, appointment_ref=booked.ref, reason="import")
    (audit,) = cancel_audits(booked)
    assert audit.actor is None and audit.actor_label == "system:cancel"
