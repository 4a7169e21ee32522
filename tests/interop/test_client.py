"""A FHIR client library (SMART's ``fhirclient``) drives the server over real HTTP: it opens it from
``metadata``, searches with R4 prefixes, pages through ``next`` links and reads. Every body it receives,
errors included, is validated again with ``fhir.resources``."""

from __future__ import annotations

import json

import pytest
from fhir.resources.R4B import get_fhir_model_class
from fhirclient import client as fhir_client
from fhirclient.models.appointment import Appointment
from fhirclient.models.schedule import Schedule
from fhirclient.models.slot import Slot
from fhirclient.server import FHIRNotFoundException
from rest_framework.authtoken.models import Token

from interop.fhir import fhir_id
from scheduling.models import AppointmentStatus
from scheduling.services import appointment_book
from tests.conftest import seoul
from tests.waitlist.loop_helpers import open_vacancy
from tests.worlds import waitlist_world

pytestmark = pytest.mark.usefixtures("no_broker")


@pytest.fixture
def world(transactional_db):
    world = waitlist_world()
    world.free = open_vacancy(world, seoul(4, 10))
    world.booked = [appointment_book(clinic=world.clinic, patient=world.patient(), practitioner=world.doctor,
                                     treatment=world.treatment, starts_at=seoul(day, 11),
                                     status=AppointmentStatus.CONFIRMED) for day in (5, 6, 7)]
    return world


@pytest.fixture
def smart(world, live_server):
    """The client, authenticated by the token header on its session; ``smart.bodies`` are (status, body)."""
    smart = fhir_client.FHIRClient(settings={
        "app_id": "ehr-test", "api_base": f"{live_server.url}/api/v1/clinics/{world.clinic.ref}/fhir/"})
    token, _ = Token.objects.get_or_create(user=world.staff)
    smart.server.session.headers["Authorization"] = f"Token {token.key}"
    smart.bodies = []

    def validate(response, *args, **kwargs):
        assert response.headers["Content-Type"] == "application/fhir+json"
        body = json.loads(response.content)
        get_fhir_model_class(body["resourceType"]).model_validate(body)
        smart.bodies.append((response.status_code, body["resourceType"]))

    smart.server.session.hooks["response"].append(validate)
    return smart


def test_the_client_opens_the_server_from_its_capability_statement(smart):
    smart.prepare()
    statement = smart.server.capabilityStatement
    assert statement.fhirVersion == "4.0.1"
    assert {r.type for r in statement.rest[0].resource} >= {"Slot", "Appointment", "Schedule"}
    assert smart.bodies == [(200, "CapabilityStatement")]


def test_the_client_searches_with_prefixes_pages_and_reads(smart, world):
    smart.prepare()
    search = Slot.where(struct={"start": "ge2030-12-05", "status": "busy", "_count": "1"})
    pages = list(search.perform_iter(smart.server))
    slots = [entry.resource for page in pages for entry in page.entry or []]
    assert len(pages) == 3
    assert [s.id for s in slots] == [fhir_id(a.ref) for a in world.booked]
    read = Slot.read(slots[0].id, smart.server)
    assert read.status == "busy" and read.meta.versionId
    schedule = Schedule.read(read.schedule.reference.split("/")[1], smart.server)
    assert schedule.actor[0].reference == f"Practitioner/{fhir_id(world.doctor.ref)}"
    booked = list(Appointment.where(struct={"status": "booked", "date": "lt2030-12-07"})
                  .perform_resources_iter(smart.server))
    assert {a.id for a in booked} == {fhir_id(a.ref) for a in world.booked[:2]}
    assert all(status == 200 for status, _ in smart.bodies)


def test_a_missing_resource_reaches_the_client_as_a_not_found_operation_outcome(smart):
    smart.prepare()
    with pytest.raises(FHIRNotFoundException) as raised:
        Appointment.read("apt.missing", smart.server)
    assert raised.value.response.json()["issue"][0]["code"] == "not-found"
    assert smart.bodies[-1] == (404, "OperationOutcome")
