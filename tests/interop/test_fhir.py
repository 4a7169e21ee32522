"""FHIR R4 read view: valid Slot/Appointment resources (validated by fhir.resources), the status
mapping, clinic scoping (404 out of scope, as an OperationOutcome), keyset paging, and no patient identity
beyond a ref."""

from __future__ import annotations

import pytest
from fhir.resources.R4B.appointment import Appointment as FhirAppointment
from fhir.resources.R4B.slot import Slot as FhirSlot

from interop.fhir import fhir_id
from scheduling.models import AppointmentStatus
from scheduling.services import appointment_book
from tests.conftest import assert_no_pii, seoul, token_client
from tests.interop.fhir_helpers import entries, links, outcome, validated
from tests.waitlist.loop_helpers import make_offer, open_vacancy
from tests.worlds import waitlist_world

WINDOW = {"start": [f"ge{seoul(2, 0).isoformat()}", f"lt{seoul(9, 0).isoformat()}"]}


pytestmark = pytest.mark.usefixtures("frozen_clock", "no_broker")


@pytest.fixture
def schedule(db):
    """One of each: a free slot (vacancy, nobody to offer), a hold (offer out), HELD, CONFIRMED,
    PROPOSED and CANCELLED appointments."""
    world = waitlist_world()
    offer = make_offer(world, starts_at=seoul(3, 10))  # its source appointment is CANCELLED
    free = open_vacancy(world, seoul(4, 10))
    def book(day, status):
        return appointment_book(clinic=world.clinic, patient=world.patient(), practitioner=world.doctor,
                                treatment=world.treatment, starts_at=seoul(day, 11), status=status)

    held = book(5, AppointmentStatus.HELD)
    confirmed = book(6, AppointmentStatus.CONFIRMED)
    proposed = book(7, AppointmentStatus.PROPOSED)
    return world, offer, free, held, confirmed, proposed


def get(client, clinic, path, **params):
    return client.get(f"/api/v1/clinics/{clinic.ref}/fhir/{path}", params)


resources = entries


def test_slots_are_valid_fhir_with_free_tentative_and_busy(schedule):
    world, offer, free, held, confirmed, _ = schedule
    slots = {s.id: s.status for s in resources(get(token_client(world.staff), world.clinic, "Slot", **WINDOW),
                                               FhirSlot)}
    assert slots[fhir_id(free.ref)] == "free"
    assert slots[fhir_id(offer.hold.ref)] == "busy-tentative"
    assert slots[fhir_id(held.ref)] == "busy"
    assert slots[fhir_id(confirmed.ref)] == "busy"
    assert fhir_id(offer.vacancy.ref) not in slots  # offered out: its hold is the slot


def test_appointments_map_proposed_pending_booked_cancelled(schedule):
    world, offer, _, held, confirmed, proposed = schedule
    found = {a.id: a for a in resources(get(token_client(world.staff), world.clinic, "Appointment", **WINDOW),
                                        FhirAppointment)}
    assert found[fhir_id(proposed.ref)].status == "proposed"
    assert found[fhir_id(held.ref)].status == "pending"
    assert found[fhir_id(confirmed.ref)].status == "booked"
    cancelled = [a for a in found.values() if a.status == "cancelled"]
    assert len(cancelled) == 2  # the two whose cancellations opened the vacancies


def test_an_appointment_names_the_patient_only_by_an_opaque_reference(schedule):
    world, _, _, held, *_ = schedule
    response = get(token_client(world.staff), world.clinic, f"Appointment/{fhir_id(held.ref)}")
    appointment = validated(response)
    patient = next(p for p in appointment.participant if p.actor.reference.startswith("Patient/"))
    assert patient.actor.reference == f"Patient/{fhir_id(held.patient.ref)}"
    assert patient.actor.display is None
    assert_no_pii(response.content.decode(), [held.patient])


def test_search_bodies_carry_no_patient_data(schedule):
    world, offer, _, held, confirmed, proposed = schedule
    client = token_client(world.staff)
    body = get(client, world.clinic, "Appointment", **WINDOW).content.decode()
    body += get(client, world.clinic, "Slot", **WINDOW).content.decode()
    assert_no_pii(body, [offer.entry.patient, held.patient, confirmed.patient, proposed.patient])


def test_a_slot_reads_by_id(schedule):
    world, _, free, *_ = schedule
    response = get(token_client(world.staff), world.clinic, f"Slot/{fhir_id(free.ref)}")
    assert validated(response).status == "free"


def test_another_clinics_resources_are_404_like_missing_ones(schedule, db):
    world, _, _, held, *_ = schedule
    other = waitlist_world()
    client = token_client(other.staff)
    foreign = outcome(get(client, other.clinic, f"Appointment/{fhir_id(held.ref)}"), 404, "not-found")
    missing = outcome(get(client, other.clinic, "Appointment/apt.missing"), 404, "not-found")
    assert foreign.model_dump() == missing.model_dump()
    outcome(get(client, world.clinic, "Slot", **WINDOW), 404, "not-found")  # a clinic outside the caller's scope


def test_paging_with_next_links_visits_every_slot_once(schedule):
    world = schedule[0]
    client = token_client(world.staff)
    everything = [s.id for s in resources(get(client, world.clinic, "Slot", **WINDOW), FhirSlot)]
    seen, url = [], f"/api/v1/clinics/{world.clinic.ref}/fhir/Slot"
    params = {**WINDOW, "_count": 1}
    for _ in range(10):
        response = client.get(url, params)
        seen += [s.id for s in resources(response, FhirSlot)]
        found = links(response)
        if "next" not in found:
            break
        url, params = found["next"].replace("http://testserver", ""), None
    assert seen == everything and len(seen) == 4


@pytest.mark.parametrize("params", [
    {"start": "tomorrow"}, {"start": "2030-12-01T00:00:00"}, {"_count": "-1"}, {"_count": "201"},
    {"start": "ge9999-12-31T23:59:59-05:00"}, {"start": "9999-12-31T23:59:59-05:00"}, {"start": "lt9999-12-31"},
    {"start": "0001-01-01T00:00:00+09:00"}, {"start": "2030-13"}, {"start": "2030-02-30"},
    {"_lastUpdated": "gt9999-12-31T23:59:59.999999-14:00"}, {"status": "maybe"}, {"schedule": "Patient/x"},
    {"_after": "not-a-cursor"},
])
def test_bad_search_parameters_are_a_400_operation_outcome(schedule, params):
    world = schedule[0]
    outcome(get(token_client(world.staff), world.clinic, "Slot", **params), 400, "invalid")
