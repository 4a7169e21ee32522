"""The front desk's verbs: each through the API's service, role and validation, audited with its evidence, and
refused with the API's typed error with nothing changed."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from common.models import AuditEntry
from scheduling.models import Appointment, AppointmentStatus
from tests.conftest import seoul
from tests.operations.waitlist_helpers import make_offer
from waitlist.models import EntryStatus, Offer, OfferStatus, Vacancy, WaitlistEntry

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]
HX = {"HTTP_HX_REQUEST": "true"}


def desk(web, clinic, verb: str, key: str = "k-desk-1", **data):
    url = reverse(f"console:desk-verb-{verb}", kwargs={"clinic_ref": clinic.ref})
    return web.post(url, {"idempotency_key": key, **data}, **HX)


def toast(response) -> str:
    return json.loads(response["HX-Trigger"])["console-toast"]["message"]


def test_staff_cancel_opens_the_vacancy_and_is_audited(staff_web, world):
    appointment = world.confirmed(seoul(4, 10))
    response = desk(staff_web, world.clinic, "cancel", appointment=appointment.ref, reason_code="PATIENT_REQUEST",
                    reason="called to cancel")
    assert response.status_code == 200, response.content
    appointment.refresh_from_db()
    assert appointment.status == AppointmentStatus.CANCELLED
    assert appointment.cancelled_by == "staff:staff-user"
    assert Vacancy.objects.filter(source_appointment=appointment).exists()
    row = AuditEntry.objects.get(action="console.appointment_cancel")
    assert row.target_ref == appointment.ref and row.reason == "PATIENT_REQUEST: called to cancel"
    assert "waitlist-changed" in response["HX-Trigger"]


def test_cancel_of_a_cancelled_appointment_is_refused_and_changes_nothing(staff_web, world):
    appointment = world.confirmed(seoul(4, 10))
    desk(staff_web, world.clinic, "cancel", key="k1", appointment=appointment.ref, reason_code="OTHER", reason="x")
    audits = AuditEntry.objects.count()
    response = desk(staff_web, world.clinic, "cancel", key="k2", appointment=appointment.ref, reason_code="OTHER",
                    reason="again")
    assert response.status_code == 409 and toast(response).startswith("Cannot be cancelled: ")
    assert toast(response).endswith("(APPOINTMENT_NOT_CANCELLABLE)")
    assert AuditEntry.objects.count() == audits
    assert Vacancy.objects.filter(source_appointment=appointment).count() == 1


def test_cancel_of_another_clinics_appointment_is_not_found(staff_web, world, second_clinic):
    other = Appointment.objects.filter(pk=world.confirmed(seoul(4, 10)).pk)
    other.update(clinic=second_clinic)
    response = desk(staff_web, world.clinic, "cancel", appointment=other.get().ref, reason_code="OTHER", reason="x")
    assert response.status_code == 404
    assert other.get().status == AppointmentStatus.CONFIRMED


def test_staff_add_a_patient_to_the_waitlist(staff_web, world):
    patient = world.patient()
    response = desk(staff_web, world.clinic, "entry", patient=patient.ref, treatment=world.treatment.ref,
                    practitioner="", earliest="2030-12-03", latest="2030-12-20", priority_rank="0")
    assert response.status_code == 200, response.content
    entry = WaitlistEntry.objects.get(patient=patient)
    assert entry.status == EntryStatus.WAITING and entry.practitioner_id is None
    assert AuditEntry.objects.filter(action="console.entry_create", target_ref=entry.ref).exists()


def test_the_desk_records_when_the_patient_can_come_through_the_apis_availability(staff_web, world):
    from waitlist.joining import availability as av

    patient = world.patient()
    response = desk(staff_web, world.clinic, "entry", patient=patient.ref, treatment=world.treatment.ref,
                    practitioner="", earliest="2030-12-03", latest="2030-12-20", priority_rank="0",
                    days=["MON", "WED"], parts=["MORNING"])
    assert response.status_code == 200, response.content
    entry = WaitlistEntry.objects.get(patient=patient)
    assert entry.availability == av.mask_of(["MON", "WED"], ["MORNING"])
    assert "can come: Mon morning, Wed morning" in response.content.decode()
    # Days alone are every part of those days (the API's rule for days without parts).
    other = world.patient()
    desk(staff_web, world.clinic, "entry", key="k-desk-2", patient=other.ref, treatment=world.treatment.ref,
         practitioner="", earliest="2030-12-03", latest="2030-12-20", priority_rank="0", days=["SAT"])
    assert WaitlistEntry.objects.get(patient=other).availability == av.mask_of(["SAT"], av.PARTS)


def test_any_time_is_the_default_and_refuses_days_ticked_beside_it(staff_web, world):
    from waitlist.joining import availability as av

    page = staff_web.get(reverse("console:desk", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert 'name="any_time"' in page and 'id="desk-entry_any_time" checked' in page
    assert page.count('name="days"') == 7 and page.count('name="parts"') == 3
    patient = world.patient()
    window = {"patient": patient.ref, "treatment": world.treatment.ref, "practitioner": "",
              "earliest": "2030-12-03", "latest": "2030-12-20", "priority_rank": "0"}
    response = desk(staff_web, world.clinic, "entry", any_time="on", days=["MON"], **window)
    assert response.status_code == 200 and "Untick" in response.content.decode()
    assert not WaitlistEntry.objects.filter(patient=patient).exists()
    response = desk(staff_web, world.clinic, "entry", key="k-desk-3", any_time="on", **window)
    assert WaitlistEntry.objects.get(patient=patient).availability == av.ANY_TIME
    assert "can come: any time" in response.content.decode()


def test_an_unknown_day_is_a_form_error_and_nothing_is_added(staff_web, world):
    patient = world.patient()
    response = desk(staff_web, world.clinic, "entry", patient=patient.ref, treatment=world.treatment.ref,
                    practitioner="", earliest="2030-12-03", latest="2030-12-20", priority_rank="0", days=["FUNDAY"])
    assert response.status_code == 200 and "field-error" in response.content.decode()
    assert not WaitlistEntry.objects.filter(patient=patient).exists()


def test_staff_may_not_set_a_priority_and_nothing_is_added(staff_web, world):
    patient = world.patient()
    response = desk(staff_web, world.clinic, "entry", patient=patient.ref, treatment=world.treatment.ref,
                    practitioner="", earliest="2030-12-03", latest="2030-12-20", priority_rank="100")
    assert response.status_code == 200  # the form offers STAFF no such choice: a form error
    assert not WaitlistEntry.objects.filter(patient=patient).exists()


def test_an_unknown_patient_is_the_apis_validation_error(staff_web, world):
    response = desk(staff_web, world.clinic, "entry", patient="pt_nobody", treatment=world.treatment.ref,
                    practitioner="", earliest="2030-12-03", latest="2030-12-20", priority_rank="0")
    assert response.status_code == 400 and toast(response).startswith("Not valid: ")


def test_staff_take_the_patients_yes_on_the_phone(staff_web, world):
    offer = make_offer(world)
    response = desk(staff_web, world.clinic, "accept", offer=offer.ref, phone="on", note="called at 9")
    assert response.status_code == 200, response.content
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED
    row = AuditEntry.objects.get(action="console.offer_claim")
    assert row.reason == "the patient said so on the phone; called at 9" and row.target_ref == offer.ref


def test_accept_without_the_phone_evidence_changes_nothing(staff_web, world):
    offer = make_offer(world)
    response = desk(staff_web, world.clinic, "accept", offer=offer.ref)
    assert response.status_code == 200 and b"field-error" in response.content
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED


def test_staff_may_not_decline_for_the_patient(staff_web, world):
    offer = make_offer(world)
    response = desk(staff_web, world.clinic, "decline", offer=offer.ref, phone="on")
    assert response.status_code == 403
    assert Offer.objects.get(pk=offer.pk).status == OfferStatus.OFFERED


def test_the_desk_page_shows_staff_only_their_verbs(staff_web, world):
    html = staff_web.get(reverse("console:desk", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    for verb in ("cancel", "entry", "accept", "late_yes", "standing", "release"):
        assert f'data-testid="desk-{verb}"' in html
    assert 'data-testid="desk-decline"' not in html and "Decline for the patient" in html


def test_staff_record_book_me_automatically_on_the_patients_word(staff_web, world):
    entry = world.waiting()
    response = desk(staff_web, world.clinic, "standing", entry=entry.ref, state="GRANTED", min_notice_minutes="60",
                    phone="on")
    assert response.status_code == 200, response.content
    assert AuditEntry.objects.filter(action="console.standing_acceptance_record", target_ref=entry.ref,
                                     reason="the patient said so on the phone").exists()


def test_a_replayed_form_runs_once(staff_web, world):
    offer = make_offer(world)
    desk(staff_web, world.clinic, "accept", offer=offer.ref, phone="on")
    response = desk(staff_web, world.clinic, "accept", offer=offer.ref, phone="on")
    assert response.status_code == 200 and b"replayed" in response.content
    assert AuditEntry.objects.filter(action="console.offer_claim").count() == 1
