"""One live entry per patient, treatment and overlapping window: a second one is 409 ENTRY_DUPLICATE (not
merged), enforced by an exclusion constraint; a later window, another treatment or a closed entry is fine."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connections

from common.errors import EntryDuplicate
from tests.conftest import race, seoul, token_client
from tests.worlds import waitlist_world
from waitlist import services
from waitlist.models import EntryStatus, WaitlistEntry


def _body(world, patient, start, end, treatment=None) -> dict:
    return {"patient": patient.ref, "treatment": (treatment or world.treatment).ref,
            "earliest": start.isoformat(), "latest": end.isoformat()}


def _post(client, world, body, key):
    return client.post(f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/", body, format="json",
                       HTTP_IDEMPOTENCY_KEY=key)


def test_a_second_entry_for_an_overlapping_window_is_refused(world, staff_api):
    patient = world.patient()
    first = _post(staff_api, world, _body(world, patient, seoul(3, 9), seoul(3, 18)), "a")
    assert first.status_code == 201
    second = _post(staff_api, world, _body(world, patient, seoul(3, 12), seoul(4, 12)), "b")
    assert second.status_code == 409 and second.json()["code"] == "ENTRY_DUPLICATE"
    assert second.json()["fields"]["existing"] == [first.json()["ref"]]
    assert WaitlistEntry.objects.filter(patient=patient).count() == 1


def test_an_adjacent_window_or_another_treatment_is_a_new_entry(world, staff_api):
    from tests import factories as f

    patient = world.patient()
    assert _post(staff_api, world, _body(world, patient, seoul(3, 9), seoul(3, 18)), "a").status_code == 201
    assert _post(staff_api, world, _body(world, patient, seoul(3, 18), seoul(4, 9)), "b").status_code == 201
    other = f.TreatmentFactory(clinic=world.clinic, duration_minutes=30)
    assert _post(staff_api, world, _body(world, patient, seoul(3, 9), seoul(3, 18), other), "c").status_code == 201


def test_a_withdrawn_entry_does_not_block_a_new_one(world):
    patient = world.patient()
    entry = world.waiting(patient)
    services.entry_withdraw(clinic=world.clinic, entry_ref=entry.ref, reason="moved", actor=world.staff)
    again = world.waiting(patient)
    assert again.status == EntryStatus.WAITING


def test_an_offered_entry_still_blocks_a_second_one(world):
    from tests.waitlist.loop_helpers import make_offer

    patient = world.patient()
    offer = make_offer(world, patient)
    entry = offer.entry
    with pytest.raises(EntryDuplicate):
        services.entry_create(clinic=world.clinic, patient=patient, treatment=entry.treatment,
                              earliest=entry.earliest + timedelta(hours=1), latest=entry.latest)


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_creates_for_one_window_make_one_entry(queued_dispatches):
    world = waitlist_world()
    patient = world.patient()
    body = _body(world, patient, seoul(3, 9), seoul(3, 18))

    def create(i: int):
        try:
            return _post(token_client(world.staff), world, body, f"k{i}").status_code
        finally:
            connections.close_all()

    codes = race(create, 4)
    assert sorted(codes) == [201, 409, 409, 409], codes
    assert WaitlistEntry.objects.filter(patient=patient).count() == 1
