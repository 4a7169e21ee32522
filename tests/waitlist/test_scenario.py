"""The seed's scenario end to end through the API: cancel → vacancy → dispatch → claim → book."""

from __future__ import annotations

from datetime import timedelta

from scheduling.models import Appointment, AppointmentStatus, CapacityAllocation, CapacityHold, HoldStatus
from tests.conftest import seoul
from waitlist.models import EntryStatus, Offer, OfferEvent, Vacancy, VacancyStatus


def post(client, url, body=None, key=None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(url, body or {}, format="json", **headers)


def test_a_cancels_b_is_offered_c_never(
    world, staff_api, queued_dispatches, django_capture_on_commit_callbacks
):
    base = f"/api/v1/clinics/{world.clinic.ref}"
    a, b, c = world.patient(), world.patient(), world.patient()
    a_appointment = world.confirmed(seoul(3, 10), patient=a)
    # A also waits for the same kind of slot: the cancelling patient is never offered their own slot.
    world.waiting(a, priority_rank=50)
    b_entry = world.waiting(b, practitioner=world.doctor, earliest=seoul(3, 9), latest=seoul(3, 12))
    c_entry = world.waiting(
        c, priority_rank=100, practitioner=world.other_doctor, treatment=world.other_treatment
    )

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post(
            staff_api, f"{base}/appointments/{a_appointment.ref}/cancel", {"reason": "sick"}, key="c1"
        )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "CANCELLED" and body["version"] == 2 and body["vacancy"]
    vacancy = Vacancy.objects.get(ref=body["vacancy"])
    assert len(callbacks) == 1 and queued_dispatches == [vacancy.pk]  # queued on commit, not inside

    response = post(staff_api, f"{base}/vacancies/{vacancy.ref}/dispatch")
    assert response.status_code == 200
    assert response.json()["outcome"] == "OFFERED"
    offer = Offer.objects.get(ref=response.json()["offer"])
    assert offer.entry_id == b_entry.pk and offer.slot_fit == 1
    assert not Offer.objects.filter(entry=c_entry).exists()

    detail = staff_api.get(f"{base}/offers/{offer.ref}").json()
    assert detail["status"] == "OFFERED" and detail["version"] == 1 and detail["policy_version"] == 1
    # The lead-time window: 10 % of the 49 hours left.
    assert detail["expires_at"] == (seoul(1, 9) + timedelta(hours=4, minutes=54)).isoformat()
    assert staff_api.get(f"{base}/vacancies/{vacancy.ref}").json()["active_offer"] == offer.ref

    # A second dispatch finds the offer and does nothing else.
    again = post(staff_api, f"{base}/vacancies/{vacancy.ref}/dispatch").json()
    assert (again["outcome"], again["offer"]) == ("ALREADY_OFFERED", offer.ref)

    claim = post(staff_api, f"{base}/offers/{offer.ref}/claim", {"expected_version": 1}, key="k1")
    assert claim.status_code == 200, claim.content
    claimed = claim.json()
    assert claimed["status"] == "ACCEPTED" and claimed["hold"] == offer.hold.ref and claimed["receipt"]
    hold = CapacityHold.objects.get(ref=claimed["hold"])
    assert hold.status == HoldStatus.ACCEPTED  # ACCEPTED is not CONFIRMED: no appointment yet
    assert not Appointment.objects.filter(patient=b).exists()

    booked = post(staff_api, f"{base}/holds/{hold.ref}/book", key="b1")
    assert booked.status_code == 201, booked.content
    appointment = Appointment.objects.get(ref=booked.json()["appointment"])
    assert booked.json()["status"] == "CONFIRMED" and appointment.patient == b
    assert appointment.starts_at == seoul(3, 10)
    b_entry.refresh_from_db()
    vacancy.refresh_from_db()
    hold.refresh_from_db()
    assert b_entry.status == EntryStatus.BOOKED and vacancy.status == VacancyStatus.FILLED
    assert hold.status == HoldStatus.CONSUMED and hold.appointment == appointment
    allocation = CapacityAllocation.objects.get(active=True, practitioner=world.doctor)
    assert allocation.appointment == appointment and allocation.hold == hold  # moved in place
    assert list(OfferEvent.objects.filter(offer=offer).order_by("id").values_list("reason_code", flat=True)) == [
        "MATCHED",
        "CLAIMED",
        "BOOKED",
    ]
    # Booking again (a retry with a new key) answers the same appointment.
    retry = post(staff_api, f"{base}/holds/{hold.ref}/book", key="b2")
    assert retry.status_code == 201 and retry.json() == booked.json()


def test_cancel_inside_the_lead_time_or_of_a_held_appointment_opens_no_vacancy(world, staff_api):
    base = f"/api/v1/clinics/{world.clinic.ref}"
    soon = world.confirmed(seoul(1, 11))  # 2 hours ahead; the clinic's lead time is 3 hours
    response = post(staff_api, f"{base}/appointments/{soon.ref}/cancel", {"reason": "x"})
    assert response.status_code == 200 and response.json()["vacancy"] is None

    held = world.confirmed(seoul(3, 14))
    Appointment.objects.filter(pk=held.pk).update(status=AppointmentStatus.HELD)
    response = post(staff_api, f"{base}/appointments/{held.ref}/cancel", {"reason": "x"})
    assert response.json()["vacancy"] is None
    assert not Vacancy.objects.exists()


def test_cancel_with_a_stale_version_is_a_conflict_and_opens_nothing(world, staff_api):
    base = f"/api/v1/clinics/{world.clinic.ref}"
    appointment = world.confirmed(seoul(3, 10))
    response = post(
        staff_api, f"{base}/appointments/{appointment.ref}/cancel", {"reason": "x", "expected_version": 7}
    )
    assert response.status_code == 409 and response.json()["code"] == "VERSION_CONFLICT"
    assert not Vacancy.objects.exists()
