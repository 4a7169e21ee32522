"""The EHR writes appointments: ``PUT Appointment?identifier=system|value`` by the integration credential,
through the same services as the API (capacity, CAS, cancellation opening a vacancy). Every body is
validated with fhir.resources."""

from __future__ import annotations

import pytest

from common.models import AuditEntry
from interop.models import AppointmentIdentifier
from scheduling.models import Appointment, AppointmentStatus
from tests.conftest import race, seoul, token_client
from tests.interop.ehr import EHR_SYSTEM, appointment, ehr_client, put
from tests.interop.fhir_helpers import entries, outcome, validated
from tests.worlds import waitlist_world
from waitlist.models import Vacancy

pytestmark = pytest.mark.usefixtures("frozen_clock")
ID = f"{EHR_SYSTEM}|A-1001"


@pytest.fixture
def world(db):
    world = waitlist_world()
    world.ehr = ehr_client(world.clinic)
    world.pt = world.patient()
    return world


def book(world, **kw):
    return put(world.ehr, world.clinic, ID, appointment(world, world.pt, seoul(5, 11), **kw))


def test_a_new_identifier_books_a_confirmed_appointment_kept_beside_our_ref(world, no_broker):
    response = book(world)
    created = validated(response, 201)
    assert created.status == "booked"
    assert {(i.system, i.value) for i in created.identifier} == {(EHR_SYSTEM, "A-1001")}
    row = Appointment.objects.get(clinic=world.clinic)
    assert row.status == AppointmentStatus.CONFIRMED and row.starts_at == seoul(5, 11)
    assert AppointmentIdentifier.objects.get(appointment=row).value == "A-1001"
    assert response["ETag"] == f'W/"{row.version}"'
    assert response["Location"].endswith(f"/Appointment/{created.id}/_history/{row.version}")
    assert AuditEntry.objects.filter(action="fhir_appointment_put", target_ref=row.ref).exists()


def test_the_same_resource_sent_twice_changes_nothing(world, no_broker):
    first = validated(book(world), 201)
    again = validated(book(world), 200)
    assert again.id == first.id and again.meta.versionId == first.meta.versionId
    assert Appointment.objects.filter(clinic=world.clinic).count() == 1


def test_an_overlap_is_a_409_conflict_and_creates_nothing(world, no_broker):
    world.confirmed(seoul(5, 11))
    outcome(book(world), 409, "conflict")
    assert not AppointmentIdentifier.objects.exists()
    assert Appointment.objects.filter(clinic=world.clinic).count() == 1


def test_a_stale_if_match_is_a_412_and_changes_nothing(world, no_broker):
    validated(book(world), 201)
    response = put(world.ehr, world.clinic, ID, appointment(world, world.pt, seoul(5, 11), status="cancelled"),
                   HTTP_IF_MATCH='W/"0"')
    outcome(response, 412, "conflict")
    assert Appointment.objects.get(clinic=world.clinic).status == AppointmentStatus.CONFIRMED


def test_a_current_if_match_is_applied(world, queued_dispatches):
    created = validated(book(world), 201)
    response = put(world.ehr, world.clinic, ID, appointment(world, world.pt, seoul(5, 11), status="cancelled"),
                   HTTP_IF_MATCH=f'W/"{created.meta.versionId}"')
    assert validated(response).status == "cancelled"


def test_cancelling_a_confirmed_appointment_opens_a_vacancy_and_queues_dispatch(world, queued_dispatches,
                                                                                django_capture_on_commit_callbacks):
    validated(book(world), 201)
    with django_capture_on_commit_callbacks(execute=True):
        cancelled = validated(book(world, status="cancelled"))
    assert cancelled.status == "cancelled"
    vacancy = Vacancy.objects.get(clinic=world.clinic)
    assert vacancy.starts_at == seoul(5, 11)
    assert queued_dispatches == [vacancy.pk]
    validated(book(world, status="cancelled"))  # again: nothing more
    assert Vacancy.objects.filter(clinic=world.clinic).count() == 1


def test_a_proposed_appointment_moves_and_is_then_booked(world, no_broker):
    validated(book(world, status="proposed"), 201)
    moved = put(world.ehr, world.clinic, ID, appointment(world, world.pt, seoul(5, 14), status="booked"))
    assert validated(moved).status == "booked"
    row = Appointment.objects.get(clinic=world.clinic)
    assert (row.status, row.starts_at) == (AppointmentStatus.CONFIRMED, seoul(5, 14))


def test_cancelling_an_unknown_identifier_is_a_422(world, no_broker):
    outcome(book(world, status="cancelled"), 422, "processing")
    assert not Appointment.objects.filter(clinic=world.clinic).exists()


@pytest.mark.parametrize("change", [
    lambda body, world: body.update(status="arrived"),
    lambda body, world: body["participant"][1]["actor"].update(reference="Practitioner/pr.missing"),
    lambda body, world: body["participant"][0]["actor"].update(reference=f"Patient/{waitlist_world().patient().ref}"),
    lambda body, world: body.pop("serviceType"),
    lambda body, world: body.update(end=body["start"]),
])
def test_what_cannot_be_mapped_is_a_422_and_books_nothing(world, no_broker, change):
    body = appointment(world, world.pt, seoul(5, 11))
    change(body, world)
    outcome(put(world.ehr, world.clinic, ID, body), 422, "processing")
    assert not Appointment.objects.filter(clinic=world.clinic).exists()


def test_a_body_that_is_not_a_fhir_appointment_is_a_400(world, no_broker):
    outcome(put(world.ehr, world.clinic, ID, {"resourceType": "Appointment", "status": 7}), 400, "invalid")


def test_a_body_that_is_not_fhir_json_is_a_415(world, no_broker):
    response = world.ehr.put(f"/api/v1/clinics/{world.clinic.ref}/fhir/Appointment?identifier={ID}",
                             data="<Appointment/>", content_type="application/fhir+xml")
    outcome(response, 415, "not-supported")


def test_staff_without_the_credential_get_403_and_others_404(world, no_broker):
    body = appointment(world, world.pt, seoul(5, 11))
    outcome(put(token_client(world.staff), world.clinic, ID, body), 403, "forbidden")
    outcome(put(world.ehr, waitlist_world().clinic, ID, body), 404, "not-found")
    assert not Appointment.objects.exists()


def test_the_credential_reads_and_finds_by_identifier(world, no_broker):
    created = validated(book(world), 201)
    found = entries(world.ehr.get(f"/api/v1/clinics/{world.clinic.ref}/fhir/Appointment", {"identifier": ID}),
                    type(created))
    assert [a.id for a in found] == [created.id]


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_puts_of_one_identifier_book_once(no_broker):
    world = waitlist_world()
    ehr, patient = ehr_client(world.clinic), world.patient()
    body = appointment(world, patient, seoul(5, 11))
    statuses = race(lambda i: put(ehr, world.clinic, ID, body).status_code, 2)
    assert sorted(statuses) == [200, 201]
    assert Appointment.objects.filter(clinic=world.clinic).count() == 1


def test_the_ehr_identifier_is_shown_in_the_vacancy_panel_and_on_the_appointment_page(world, no_broker):
    """The EHR's identifier (its own code for the appointment, not patient data) sits beside our ref where staff
    trace a vacancy: the panel's "Opened by" and the appointment's ref page."""
    from django.test import Client
    from django.urls import reverse

    from waitlist.figures.panels import ops_vacancy_panel

    validated(book(world), 201)
    validated(book(world, status="cancelled"))
    vacancy = Vacancy.objects.get(clinic=world.clinic)
    panel = ops_vacancy_panel(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert panel["source_appointment"]["ehr_identifiers"] == [ID]
    web = Client()
    web.force_login(world.staff)
    html = web.get(reverse("console:waitlist-vacancy", args=[world.clinic.ref, vacancy.ref])).content.decode()
    assert 'data-testid="source-ehr-id"' in html and ID in html
    appointment = Appointment.objects.get(clinic=world.clinic)
    page = web.get(reverse("console:ref", args=[world.clinic.ref, appointment.ref])).content.decode()
    assert "A-1001" in page and EHR_SYSTEM in page


def test_the_ehrs_cancellation_records_the_integration_and_its_code(world, no_broker):
    from tests.interop.ehr import ehr_user

    user = ehr_user(world.clinic)
    client = token_client(user)
    validated(put(client, world.clinic, ID, appointment(world, world.pt, seoul(5, 11))), 201)
    validated(put(client, world.clinic, ID, appointment(world, world.pt, seoul(5, 11), status="cancelled")))
    row = Appointment.objects.get(clinic=world.clinic)
    assert (row.cancel_reason_code, row.cancelled_by) == ("EHR_CANCELLED", f"integration:{user.get_username()}")
    read = validated(client.get(f"/api/v1/clinics/{world.clinic.ref}/fhir/Appointment/{row.ref.replace('_', '.')}"))
    assert read.cancelationReason.coding[0].code == "EHR_CANCELLED"


@pytest.mark.parametrize("element", ["start", "end"])
def test_a_time_without_an_offset_is_a_400_naming_the_element_and_books_nothing(world, element):
    """Issue 43's offset rule on the EHR's writes too: an instant needs its offset (FHIR's ``instant``)."""
    body = appointment(world, world.pt, seoul(5, 11))
    body[element] = body[element][:19]  # "2030-12-05T11:00:00": the wall time alone
    result = outcome(put(world.ehr, world.clinic, ID, body), 400, "invalid")
    assert element in result.issue[0].diagnostics
    assert not Appointment.objects.filter(clinic=world.clinic).exists()
