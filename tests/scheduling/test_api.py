"""Reference data, patients and appointments over HTTP: scope, errors and idempotency."""

from __future__ import annotations

import pytest

from scheduling.models import Appointment, Patient
from tests import factories as f
from tests.conftest import race, seoul, token_client
from tests.worlds import ReferenceWorld


@pytest.fixture
def world(clinic, practitioner, treatment, resource, patient):
    return ReferenceWorld(clinic, practitioner, treatment, resource, patient)


def appointment_body(world, **overrides):
    body = {
        "patient": world.patient.ref,
        "practitioner": world.practitioner.ref,
        "treatment": world.treatment.ref,
        "starts_at": seoul(3, 10).isoformat(),
        "status": "CONFIRMED",
    }
    body.update(overrides)
    return body


def test_clinic_list_shows_only_the_callers_clinics(staff_client, clinic, other_tenant_clinic):
    response = staff_client.get("/api/v1/clinics/")
    assert response.status_code == 200
    assert [c["ref"] for c in response.json()] == [clinic.ref]
    assert response.json()[0]["timezone"] == "Asia/Seoul"


def test_reference_lists_carry_refs_names_and_durations(staff_client, world):
    clinic = world.clinic
    treatments = staff_client.get(f"/api/v1/clinics/{clinic.ref}/treatments/").json()
    assert treatments == [{"ref": world.treatment.ref, "name": world.treatment.name, "duration_minutes": 30}]
    practitioners = staff_client.get(f"/api/v1/clinics/{clinic.ref}/practitioners/").json()
    assert [p["ref"] for p in practitioners] == [world.practitioner.ref]
    resources = staff_client.get(f"/api/v1/clinics/{clinic.ref}/resources/").json()
    assert [r["ref"] for r in resources] == [world.resource.ref]


def test_patient_create_answers_only_a_ref(staff_client, clinic):
    response = staff_client.post(
        f"/api/v1/clinics/{clinic.ref}/patients/",
        {"display_name": "Hana Kim", "email": "hana@example.com", "language": "ko", "crm_patient_ref": "crm-1"},
        format="json",
    )
    assert response.status_code == 201
    assert set(response.json()) == {"ref"}
    patient = Patient.objects.get(ref=response.json()["ref"])
    assert patient.language == "ko" and len(patient.crm_fingerprint) == 64


def test_appointment_create_and_read_back_in_the_clinic_zone(staff_client, world):
    clinic = world.clinic
    created = staff_client.post(f"/api/v1/clinics/{clinic.ref}/appointments/", appointment_body(world),
                                format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["status"] == "CONFIRMED" and body["version"] == 1
    assert body["starts_at"] == "2030-12-03T10:00:00+09:00" and body["ends_at"] == "2030-12-03T10:30:00+09:00"
    fetched = staff_client.get(f"/api/v1/clinics/{clinic.ref}/appointments/{body['ref']}")
    assert fetched.status_code == 200 and fetched.json() == body


def test_overlapping_appointment_is_409_slot_occupied(staff_client, world):
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    assert staff_client.post(url, appointment_body(world), format="json").status_code == 201
    other = f.PatientFactory(clinic=world.clinic)
    response = staff_client.post(url, appointment_body(world, patient=other.ref), format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "SLOT_OCCUPIED"
    assert Appointment.objects.count() == 1


def test_a_ref_from_another_clinic_in_the_body_is_rejected_like_a_missing_one(staff_client, world):
    foreign = f.PatientFactory()
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    foreign_answer = staff_client.post(url, appointment_body(world, patient=foreign.ref), format="json")
    missing_answer = staff_client.post(url, appointment_body(world, patient="pt_nope"), format="json")
    assert foreign_answer.status_code == missing_answer.status_code == 400
    assert foreign_answer.json() == missing_answer.json()
    assert foreign_answer.json()["fields"]["patient"] == ["Not found in this clinic."]


def test_cancel_returns_cancelled_and_frees_the_slot(staff_client, world):
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    ref = staff_client.post(url, appointment_body(world), format="json").json()["ref"]
    response = staff_client.post(f"{url}{ref}/cancel", {"reason": "patient called"}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == "CANCELLED"
    assert "vacancy" in response.json()
    again = staff_client.post(url, appointment_body(world), format="json")
    assert again.status_code == 201


def test_cancel_with_a_stale_expected_version_is_409(staff_client, world):
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    ref = staff_client.post(url, appointment_body(world), format="json").json()["ref"]
    response = staff_client.post(f"{url}{ref}/cancel", {"reason": "x", "expected_version": 7}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "VERSION_CONFLICT"
    assert Appointment.objects.get(ref=ref).status == "CONFIRMED"


def test_cancel_with_an_expected_version_beyond_any_row_is_409_not_500(staff_client, world):
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    ref = staff_client.post(url, appointment_body(world), format="json").json()["ref"]
    response = staff_client.post(f"{url}{ref}/cancel", {"reason": "x", "expected_version": 2**40}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "VERSION_CONFLICT"
    assert Appointment.objects.get(ref=ref).status == "CONFIRMED"


# --- idempotency -----------------------------------------------------------------------------


def test_a_replay_returns_the_identical_status_and_body(staff_client, world):
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    first = staff_client.post(url, appointment_body(world), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    second = staff_client.post(url, appointment_body(world), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == second.status_code == 201
    assert first.content == second.content
    assert second["Idempotent-Replayed"] == "true"
    assert Appointment.objects.count() == 1


def test_a_replayed_conflict_is_replayed_too(staff_client, world):
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    staff_client.post(url, appointment_body(world), format="json")
    body = appointment_body(world, patient=f.PatientFactory(clinic=world.clinic).ref)
    first = staff_client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    second = staff_client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert first.status_code == second.status_code == 409 and first.content == second.content


def test_the_same_key_with_another_body_is_422_and_changes_nothing(staff_client, world):
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    staff_client.post(url, appointment_body(world), format="json", HTTP_IDEMPOTENCY_KEY="k-3")
    response = staff_client.post(
        url, appointment_body(world, starts_at=seoul(4, 10).isoformat()), format="json", HTTP_IDEMPOTENCY_KEY="k-3"
    )
    assert response.status_code == 422 and response.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert Appointment.objects.count() == 1


def test_keys_are_scoped_per_user(world, staff_client):
    colleague = token_client(f.user_with_role(world.clinic))
    url = f"/api/v1/clinics/{world.clinic.ref}/patients/"
    a = staff_client.post(url, {"display_name": "A", "language": "en"}, format="json", HTTP_IDEMPOTENCY_KEY="same")
    b = colleague.post(url, {"display_name": "B", "language": "en"}, format="json", HTTP_IDEMPOTENCY_KEY="same")
    assert a.status_code == b.status_code == 201 and a.json() != b.json()


@pytest.mark.parametrize("key", ["", "x" * 201, "tab\tkey", "ünïcode"])
def test_a_malformed_idempotency_key_is_a_validation_error(staff_client, world, key):
    url = f"/api/v1/clinics/{world.clinic.ref}/patients/"
    response = staff_client.post(url, {"display_name": "A", "language": "en"}, format="json",
                                 HTTP_IDEMPOTENCY_KEY=key)
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"
    assert not Patient.objects.filter(display_name="A").exists()


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_with_one_key_run_the_command_once():
    clinic = f.ClinicFactory()
    user = f.user_with_role(clinic)
    url = f"/api/v1/clinics/{clinic.ref}/patients/"

    def post(_i):
        response = token_client(user).post(url, {"display_name": "Once", "language": "en"}, format="json",
                                           HTTP_IDEMPOTENCY_KEY="one-key")
        return response.status_code, response.content

    results = race(post, 8)
    assert all(not isinstance(r, BaseException) for r in results), results
    assert len(set(results)) == 1 and results[0][0] == 201
    assert Patient.objects.filter(display_name="Once").count() == 1


# --- permission checklist ----------------------------------------------------------------------


def endpoints(world, appointment_ref):
    c = world.clinic.ref
    return [
        ("get", f"/api/v1/clinics/{c}/practitioners/", None),
        ("get", f"/api/v1/clinics/{c}/treatments/", None),
        ("get", f"/api/v1/clinics/{c}/resources/", None),
        ("post", f"/api/v1/clinics/{c}/patients/", {"display_name": "P", "language": "en"}),
        ("post", f"/api/v1/clinics/{c}/appointments/", appointment_body(world, starts_at=seoul(9, 9).isoformat())),
        ("get", f"/api/v1/clinics/{c}/appointments/{appointment_ref}", None),
        ("post", f"/api/v1/clinics/{c}/appointments/{appointment_ref}/cancel", {"reason": "r"}),
    ]


def state(world):
    return (
        list(Appointment.objects.order_by("pk").values_list("ref", "status", "version")),
        Patient.objects.count(),
    )


@pytest.fixture
def booked(world, staff_client):
    url = f"/api/v1/clinics/{world.clinic.ref}/appointments/"
    return staff_client.post(url, appointment_body(world), format="json").json()["ref"]


def test_anonymous_gets_401_everywhere_and_nothing_changes(world, booked, anon_client):
    before = state(world)
    assert anon_client.get("/api/v1/clinics/").status_code == 401
    for method, url, body in endpoints(world, booked):
        response = getattr(anon_client, method)(url, body, format="json")
        assert response.status_code == 401, url
        assert response.json()["code"] == "NOT_AUTHENTICATED"
    assert state(world) == before


def test_another_tenant_gets_404_everywhere_and_nothing_changes(world, booked, outsider_client):
    before = state(world)
    for method, url, body in endpoints(world, booked):
        response = getattr(outsider_client, method)(url, body, format="json")
        assert response.status_code == 404, url
        assert response.json() == {"code": "NOT_FOUND", "detail": "Not found."}
    assert state(world) == before


def test_an_unknown_clinic_ref_is_the_same_404(world, booked, staff_client):
    for method, url, body in endpoints(world, booked):
        url = url.replace(world.clinic.ref, "cl_does_not_exist")
        response = getattr(staff_client, method)(url, body, format="json")
        assert response.status_code == 404, url
        assert response.json() == {"code": "NOT_FOUND", "detail": "Not found."}


def test_an_unknown_or_foreign_appointment_ref_is_404(world, staff_client):
    foreign = f.AppointmentFactory()
    c = world.clinic.ref
    for ref in ("apt_missing", foreign.ref):
        assert staff_client.get(f"/api/v1/clinics/{c}/appointments/{ref}").status_code == 404
        cancel = staff_client.post(f"/api/v1/clinics/{c}/appointments/{ref}/cancel", {"reason": "r"}, format="json")
        assert cancel.status_code == 404
    foreign.refresh_from_db()
    assert foreign.status == "PROPOSED"


def test_wrong_method_is_405_with_a_code(world, staff_client):
    response = staff_client.delete(f"/api/v1/clinics/{world.clinic.ref}/patients/")
    assert response.status_code == 405 and response.json()["code"] == "METHOD_NOT_ALLOWED"


def test_malformed_json_is_a_typed_400(world, staff_client):
    response = staff_client.post(
        f"/api/v1/clinics/{world.clinic.ref}/patients/", "{not json", content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"


def test_schema_and_docs_are_served(client):
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200
