"""Appointment list over HTTP: keyset pages, status and date filters, scope; the API root and `/`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests import factories as f
from tests.conftest import seoul


def _appointments(clinic, n, *, day=3, status="CONFIRMED"):
    return [
        f.AppointmentFactory(clinic=clinic, starts_at=seoul(day, 8) + timedelta(minutes=30 * i), status=status)
        for i in range(n)
    ]


def _url(clinic, query=""):
    return f"/api/v1/clinics/{clinic.ref}/appointments/{query}"


def test_appointment_list_pages_by_start_time_with_a_next_cursor(staff_client, clinic):
    made = _appointments(clinic, 5)
    first = staff_client.get(_url(clinic, "?limit=2")).json()
    assert [a["ref"] for a in first["items"]] == [a.ref for a in made[:2]]
    assert first["next"] == made[1].ref
    second = staff_client.get(_url(clinic, f"?limit=2&after={first['next']}")).json()
    assert [a["ref"] for a in second["items"]] == [a.ref for a in made[2:4]]
    last = staff_client.get(_url(clinic, f"?limit=2&after={second['next']}")).json()
    assert [a["ref"] for a in last["items"]] == [made[4].ref] and last["next"] is None


def test_appointment_list_filters_by_status_and_local_day(staff_client, clinic):
    confirmed = _appointments(clinic, 2, day=3)
    _appointments(clinic, 2, day=4)
    held = f.AppointmentFactory(clinic=clinic, starts_at=seoul(3, 15), status="HELD")
    by_day = staff_client.get(_url(clinic, "?date=2030-12-03")).json()["items"]
    assert {a["ref"] for a in by_day} == {*(a.ref for a in confirmed), held.ref}
    by_status = staff_client.get(_url(clinic, "?date=2030-12-03&status=HELD")).json()["items"]
    assert [a["ref"] for a in by_status] == [held.ref]
    assert by_status[0]["starts_at"].endswith("+09:00")


def test_appointment_list_rejects_an_unknown_status_with_a_typed_error(staff_client, clinic):
    response = staff_client.get(_url(clinic, "?status=MAYBE"))
    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_ERROR" and "status" in response.json()["fields"]


def test_appointment_list_of_a_foreign_clinic_is_404(staff_client, other_tenant_clinic):
    _appointments(other_tenant_clinic, 1)
    assert staff_client.get(_url(other_tenant_clinic)).status_code == 404


def test_a_foreign_cursor_yields_an_empty_page(staff_client, clinic, other_tenant_clinic):
    _appointments(clinic, 2)
    foreign = _appointments(other_tenant_clinic, 1)[0]
    body = staff_client.get(_url(clinic, f"?after={foreign.ref}")).json()
    assert body == {"items": [], "next": None}


@pytest.mark.parametrize("size", [3, 30])
def test_appointment_list_query_count_does_not_grow_with_the_clinic(staff_client, clinic, size):
    _appointments(clinic, size)
    with CaptureQueriesContext(connection) as queries:
        assert staff_client.get(_url(clinic, "?limit=50")).status_code == 200
    assert len(queries) <= 6


def test_api_root_answers_json_links_without_signing_in(anon_client):
    response = anon_client.get("/api/v1/")
    assert response.status_code == 200
    links = response.json()["links"]
    assert links["clinics"].endswith("/api/v1/clinics/") and links["docs"].endswith("/api/docs/")
    assert response.json()["clinic_links"]["appointments"].endswith("clinics/{clinic}/appointments/")


def test_site_root_leads_to_the_console(client, db):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/console/"
