"""Waitlist entry list over HTTP (keyset, status/date filters, no patient data beyond refs) and
answers that name the appointment a claim or booking produced."""

from __future__ import annotations

from datetime import timedelta

from tests.conftest import seoul
from tests.waitlist.factories import NOW
from tests.waitlist.loop_helpers import make_offer
from waitlist.models import EntryStatus


def _url(world, query=""):
    return f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/{query}"


def test_entry_list_pages_longest_waiting_first(world, staff_api):
    entries = [world.waiting(waiting_since=NOW - timedelta(hours=10 - i)) for i in range(3)]
    first = staff_api.get(_url(world, "?limit=2")).json()
    assert [e["ref"] for e in first["items"]] == [e.ref for e in entries[:2]]
    rest = staff_api.get(_url(world, f"?limit=2&after={first['next']}")).json()
    assert [e["ref"] for e in rest["items"]] == [entries[2].ref] and rest["next"] is None


def test_entry_list_filters_by_status_and_window_day(world, staff_api):
    early = world.waiting(earliest=seoul(2, 0), latest=seoul(3, 0))
    late = world.waiting(earliest=seoul(6, 0), latest=seoul(9, 0))
    withdrawn = world.waiting(status=EntryStatus.WITHDRAWN)
    by_day = {e["ref"] for e in staff_api.get(_url(world, "?date=2030-12-07")).json()["items"]}
    assert late.ref in by_day and early.ref not in by_day
    by_status = staff_api.get(_url(world, "?status=WITHDRAWN")).json()["items"]
    assert [e["ref"] for e in by_status] == [withdrawn.ref]


def test_entry_list_carries_refs_not_patient_contacts(world, staff_api):
    entry = world.waiting()
    text = staff_api.get(_url(world)).content.decode()
    assert entry.patient.ref in text
    assert entry.patient.display_name not in text and entry.patient.email not in text


def test_claim_answer_names_no_appointment_before_booking_and_offer_names_it_after(world, staff_api):
    offer = make_offer(world, starts_at=seoul(3, 10))
    base = f"/api/v1/clinics/{world.clinic.ref}"
    claim = staff_api.post(f"{base}/offers/{offer.ref}/claim", {"expected_version": 1}, format="json").json()
    assert claim["appointment"] is None
    booked = staff_api.post(f"{base}/holds/{claim['hold']}/book", {}, format="json").json()
    detail = staff_api.get(f"{base}/offers/{offer.ref}").json()
    assert detail["appointment"] == booked["appointment"] and booked["appointment"].startswith("apt")
