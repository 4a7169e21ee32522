"""FHIR R4 conformance of the read view: metadata, content negotiation, every error an OperationOutcome,
the standard search parameters (date prefixes, tokens, references; AND across, OR within), Prefer:
handling, Schedule, meta and ETag. Every body is validated with fhir.resources."""

from __future__ import annotations

import pytest
from fhir.resources.R4B.appointment import Appointment as FhirAppointment
from fhir.resources.R4B.schedule import Schedule as FhirSchedule
from fhir.resources.R4B.slot import Slot as FhirSlot

from interop.fhir import fhir_id
from scheduling.models import AppointmentStatus
from scheduling.services import appointment_book
from tests.conftest import seoul, token_client
from tests.interop.fhir_helpers import entries, links, outcome, validated
from tests.waitlist.loop_helpers import make_offer, open_vacancy
from tests.worlds import waitlist_world

pytestmark = pytest.mark.usefixtures("frozen_clock", "no_broker")


@pytest.fixture
def schedule(db):
    """A free slot (day 4), a hold (day 3, offer out), HELD (day 5, other doctor), CONFIRMED (day 6),
    PROPOSED (day 7, other treatment)."""
    world = waitlist_world()
    offer = make_offer(world, starts_at=seoul(3, 10))
    free = open_vacancy(world, seoul(4, 10))

    def book(day, status, **kw):
        return appointment_book(clinic=world.clinic, patient=world.patient(), starts_at=seoul(day, 11),
                                status=status, **{"practitioner": world.doctor, "treatment": world.treatment, **kw})

    held = book(5, AppointmentStatus.HELD, practitioner=world.other_doctor)
    confirmed = book(6, AppointmentStatus.CONFIRMED)
    proposed = book(7, AppointmentStatus.PROPOSED, treatment=world.other_treatment)
    return world, {"offer": offer, "free": free, "held": held, "confirmed": confirmed, "proposed": proposed}


def get(world, path, params=None, **headers):
    return token_client(world.staff).get(f"/api/v1/clinics/{world.clinic.ref}/fhir/{path}", params, **headers)


def ids(response, model=FhirSlot) -> set[str]:
    return {r.id for r in entries(response, model)}


def test_metadata_is_a_valid_r4_capability_statement_naming_each_resource(schedule):
    world, _ = schedule
    statement = validated(get(world, "metadata"))
    assert statement.get_resource_type() == "CapabilityStatement"
    assert (statement.kind, statement.fhirVersion, statement.status) == ("instance", "4.0.1", "active")
    assert "json" in statement.format
    rest = statement.rest[0]
    assert rest.mode == "server" and "Token" in rest.security.description
    by_type = {r.type: r for r in rest.resource}
    assert {"Slot", "Appointment", "Schedule"} <= set(by_type)
    slot_params = {p.name: p.type for p in by_type["Slot"].searchParam}
    assert slot_params["start"] == "date" and slot_params["schedule"] == "reference"
    assert {"status", "service-type", "_id", "_lastUpdated", "_count"} <= set(slot_params)
    appointment_params = {p.name for p in by_type["Appointment"].searchParam}
    assert {"date", "status", "patient", "practitioner", "actor", "slot", "service-type"} <= appointment_params
    assert {i.code for i in by_type["Slot"].interaction} >= {"read", "search-type"}


@pytest.mark.parametrize("headers, params", [
    ({"HTTP_ACCEPT": "application/fhir+json"}, None),
    ({"HTTP_ACCEPT": "application/json"}, None),
    ({"HTTP_ACCEPT": "application/fhir+json;q=0.9, text/html"}, None),
    ({"HTTP_ACCEPT": "application/fhir+xml"}, {"_format": "json"}),
    ({}, None),
])
def test_fhir_json_is_negotiated_by_accept_or_format(schedule, headers, params):
    world, _ = schedule
    assert validated(get(world, "metadata", params, **headers)).get_resource_type() == "CapabilityStatement"


@pytest.mark.parametrize("headers, params", [
    ({"HTTP_ACCEPT": "application/fhir+xml"}, None),
    ({"HTTP_ACCEPT": "text/html"}, None),
    ({}, {"_format": "xml"}),
])
def test_other_formats_are_a_406_operation_outcome(schedule, headers, params):
    world, _ = schedule
    outcome(get(world, "Slot", params, **headers), 406, "not-supported")


def test_anonymous_is_a_401_operation_outcome(schedule):
    world, _ = schedule
    from rest_framework.test import APIClient
    outcome(APIClient().get(f"/api/v1/clinics/{world.clinic.ref}/fhir/Slot"), 401, "login")


def test_an_unknown_resource_type_is_a_404_operation_outcome(schedule):
    world, _ = schedule
    outcome(get(world, "Patient/pt.1"), 404, "not-found")


def test_a_method_the_route_lacks_is_a_405_operation_outcome(schedule):
    world, _ = schedule
    response = token_client(world.staff).delete(f"/api/v1/clinics/{world.clinic.ref}/fhir/Slot")
    outcome(response, 405, "not-supported")


@pytest.mark.parametrize("start, expected", [
    (["ge2030-12-04T10:00:00+09:00"], {"free", "held", "confirmed"}),
    (["gt2030-12-04T10:00:00+09:00"], {"held", "confirmed"}),
    (["lt2030-12-04T10:00:00+09:00"], {"hold"}),
    (["le2030-12-04T10:00:00+09:00"], {"hold", "free"}),
    (["eq2030-12-04T10:00:00+09:00"], {"free"}),
    (["2030-12-04"], {"free"}),
    (["ge2030-12-04", "lt2030-12-06"], {"free", "held"}),  # repeated: AND
    (["2030-12-03,2030-12-06"], {"hold", "confirmed"}),  # commas: OR
    (["2030-12"], {"hold", "free", "held", "confirmed"}),
    (["ge2030-12-04T01:00:00Z"], {"free", "held", "confirmed"}),
])
def test_slot_start_takes_r4_prefixes_and_partial_dates(schedule, start, expected):
    world, made = schedule
    names = {fhir_id(made["offer"].hold.ref): "hold", fhir_id(made["free"].ref): "free",
             fhir_id(made["held"].ref): "held", fhir_id(made["confirmed"].ref): "confirmed"}
    assert {names[i] for i in ids(get(world, "Slot", {"start": start}))} == expected


def test_slot_status_service_type_and_schedule_combine_with_and(schedule):
    world, made = schedule
    busy = ids(get(world, "Slot", {"status": "busy"}))
    assert busy == {fhir_id(made["held"].ref), fhir_id(made["confirmed"].ref)}
    assert ids(get(world, "Slot", {"status": "free,busy-tentative"})) == {
        fhir_id(made["free"].ref), fhir_id(made["offer"].hold.ref)}
    doctor = f"Schedule/{fhir_id(world.doctor.ref)}"
    assert ids(get(world, "Slot", {"status": "busy", "schedule": doctor})) == {fhir_id(made["confirmed"].ref)}
    assert ids(get(world, "Slot", {"service-type": f"urn:clinic-waitlist:treatment|{world.treatment.ref}",
                                   "schedule": fhir_id(world.other_doctor.ref)})) == {fhir_id(made["held"].ref)}
    assert ids(get(world, "Slot", {"service-type": f"other-system|{world.treatment.ref}"})) == set()
    assert ids(get(world, "Slot", {"status:not": "busy,busy-tentative"})) == {fhir_id(made["free"].ref)}


def test_slot_id_and_last_updated_filter(schedule):
    world, made = schedule
    wanted = f"{fhir_id(made['free'].ref)},{fhir_id(made['held'].ref)}"
    assert ids(get(world, "Slot", {"_id": wanted})) == {fhir_id(made["free"].ref), fhir_id(made["held"].ref)}
    assert len(ids(get(world, "Slot", {"_lastUpdated": "ge2000-01-01"}))) == 4
    assert ids(get(world, "Slot", {"_lastUpdated": "lt2000-01-01"})) == set()


def test_appointment_search_parameters(schedule):
    world, made = schedule
    held, confirmed, proposed = made["held"], made["confirmed"], made["proposed"]

    def found(**params):
        return ids(get(world, "Appointment", params), FhirAppointment)

    assert found(status="booked") == {fhir_id(confirmed.ref)}
    assert found(status="pending,proposed") == {fhir_id(held.ref), fhir_id(proposed.ref)}
    assert found(patient=f"Patient/{fhir_id(held.patient.ref)}") == {fhir_id(held.ref)}
    assert found(patient=fhir_id(proposed.patient.ref)) == {fhir_id(proposed.ref)}
    assert found(practitioner=f"Practitioner/{fhir_id(world.other_doctor.ref)}") == {fhir_id(held.ref)}
    assert found(actor=f"Practitioner/{fhir_id(world.other_doctor.ref)}") == {fhir_id(held.ref)}
    assert found(actor=fhir_id(confirmed.patient.ref)) == {fhir_id(confirmed.ref)}
    assert found(slot=f"Slot/{fhir_id(confirmed.ref)}") == {fhir_id(confirmed.ref)}
    assert found(slot=f"Slot/{fhir_id(proposed.ref)}") == set()  # PROPOSED holds no slot
    assert found(**{"service-type": world.other_treatment.ref}) == {fhir_id(proposed.ref)}
    assert found(date="ge2030-12-06", status="booked,proposed") == {fhir_id(confirmed.ref), fhir_id(proposed.ref)}
    assert found(_id=fhir_id(held.ref), status="booked") == set()  # AND across parameters
    assert found(status="arrived") == set()  # a valid R4 code we never produce


def test_unknown_parameters_are_ignored_and_left_out_of_the_self_link(schedule):
    world, _ = schedule
    response = get(world, "Slot", {"status": "free", "colour": "blue"})
    assert len(entries(response, FhirSlot)) == 1
    assert "colour" not in links(response)["self"] and "status=free" in links(response)["self"]


def test_prefer_handling_strict_makes_an_unknown_parameter_a_400(schedule):
    world, _ = schedule
    response = get(world, "Slot", {"colour": "blue"}, HTTP_PREFER="handling=strict")
    assert "colour" in outcome(response, 400, "not-supported").issue[0].diagnostics


def test_an_unsupported_modifier_is_a_400_even_when_lenient(schedule):
    world, _ = schedule
    outcome(get(world, "Slot", {"status:above": "free"}), 400, "not-supported")


def test_a_read_carries_meta_and_a_weak_etag_of_its_version(schedule):
    world, made = schedule
    response = get(world, f"Appointment/{fhir_id(made['confirmed'].ref)}")
    appointment = validated(response)
    assert appointment.meta.versionId == str(made["confirmed"].version)
    assert appointment.meta.lastUpdated is not None
    assert response["ETag"] == f'W/"{made["confirmed"].version}"'
    slot = validated(get(world, f"Slot/{fhir_id(made['free'].ref)}"))
    assert slot.meta.versionId and slot.meta.lastUpdated


def test_a_status_change_moves_last_updated_and_the_etag(schedule, frozen_clock):
    """A CAS status write (here the cancel service) bumps ``updated_at`` with the version, so a client's
    cache (ETag) and ``_lastUpdated`` searches see the change."""
    from datetime import timedelta

    from common.cas import cas_update
    from scheduling.services import appointment_cancel
    from waitlist.models import VacancyStatus

    world, made = schedule
    path = f"Appointment/{fhir_id(made['confirmed'].ref)}"
    before, before_etag = validated(response := get(world, path)).meta.lastUpdated, response["ETag"]
    slot_path = f"Slot/{fhir_id(made['free'].ref)}"
    slot_before = validated(get(world, slot_path)).meta.lastUpdated
    frozen_clock.shift(timedelta(minutes=5))
    appointment_cancel(clinic=world.clinic, appointment_ref=made["confirmed"].ref, reason="test")
    cas_update(made["free"], status=VacancyStatus.CLOSED, close_reason="test")
    after = get(world, path)
    assert validated(after).meta.lastUpdated - before == timedelta(minutes=5)
    assert after["ETag"] != before_etag
    assert validated(get(world, slot_path)).meta.lastUpdated - slot_before == timedelta(minutes=5)
    since = (before + timedelta(minutes=1)).isoformat()
    assert fhir_id(made["confirmed"].ref) in ids(get(world, "Appointment", {"_lastUpdated": f"gt{since}"}),
                                                  FhirAppointment)


def test_each_practitioner_has_a_schedule_that_slots_resolve_to(schedule):
    world, made = schedule
    schedules = entries(get(world, "Schedule"), FhirSchedule)
    assert {s.id for s in schedules} == {fhir_id(world.doctor.ref), fhir_id(world.other_doctor.ref)}
    slot = validated(get(world, f"Slot/{fhir_id(made['free'].ref)}"))
    target = validated(get(world, slot.schedule.reference))
    assert target.actor[0].reference == f"Practitioner/{fhir_id(world.doctor.ref)}"
    actor = f"Practitioner/{fhir_id(world.other_doctor.ref)}"
    assert {s.id for s in entries(get(world, "Schedule", {"actor": actor}), FhirSchedule)} == {
        fhir_id(world.other_doctor.ref)}


def test_schedule_paging_visits_each_once(schedule):
    world, _ = schedule
    response = get(world, "Schedule", {"_count": 1})
    first = entries(response, FhirSchedule)
    second = entries(token_client(world.staff).get(links(response)["next"].replace("http://testserver", "")),
                     FhirSchedule)
    assert len(first) == len(second) == 1 and first[0].id != second[0].id


def test_a_foreign_schedule_is_the_404_of_a_missing_one(schedule):
    world, _ = schedule
    other = waitlist_world()
    outcome(get(world, f"Schedule/{fhir_id(other.doctor.ref)}"), 404, "not-found")


@pytest.mark.parametrize("path, extra", [("Slot", 3), ("Appointment", 1)])
def test_a_search_page_costs_the_same_queries_however_many_rows(schedule, path, extra, django_assert_max_num_queries):
    world, _ = schedule
    client = token_client(world.staff)
    url = f"/api/v1/clinics/{world.clinic.ref}/fhir/{path}"
    client.get(url)  # warm the token and scope caches
    with django_assert_max_num_queries(6 + extra) as few:
        assert client.get(url).status_code == 200
    for day in range(10, 20):
        appointment_book(clinic=world.clinic, patient=world.patient(), practitioner=world.doctor,
                         treatment=world.treatment, starts_at=seoul(day, 11), status=AppointmentStatus.CONFIRMED)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get(url).status_code == 200
