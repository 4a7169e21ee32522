"""A yes after the answer window still takes the time while it is free (issue 22: in make simulate the patients who
answered minutes late found the slot still empty and were turned away)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from common.errors import Conflict
from common.models import AuditEntry, OutboxMessage
from scheduling.models import Appointment, AppointmentStatus
from tests.conftest import assert_no_pii, seoul, token_client
from tests.waitlist.loop_helpers import claim_path, deliver, let_expire, open_vacancy, page_client, submit
from waitlist import services
from waitlist.models import EntryStatus, Offer, OfferEvent, OfferStatus, Vacancy, VacancyStatus, WaitlistEntry

LIMITS_OFF = {"contact_cap_per_day": None, "weekly_offer_cap": None, "decline_suppression_hours": 0}


def offered(world, vacancy, entry):
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == entry.pk, result.outcome
    deliver()
    result.offer.refresh_from_db()
    return result.offer


def expired_offer(world, clock, starts_at=None):
    """One waiting patient, offered a slot, who let the window run out: the vacancy is left OPEN with no offer."""
    entry = world.waiting()
    vacancy = open_vacancy(world, starts_at or seoul(3, 10))
    offer = offered(world, vacancy, entry)
    let_expire(offer, clock)
    return offer


def offered_to_the_next(world, clock, also_waiting: int = 0):
    """The first patient let their offer expire and the vacancy went on to the next one (contact limits off):
    ``(vacancy, the expired offer, the next patient's open offer)``; ``also_waiting`` more entries wait behind."""
    services.policy_publish(clinic=world.clinic, **LIMITS_OFF)
    first, second = world.waiting(priority_rank=5), world.waiting(priority_rank=1)
    for _ in range(also_waiting):
        world.waiting(priority_rank=0)
    vacancy = open_vacancy(world, seoul(3, 10))
    late = offered(world, vacancy, first)
    let_expire(late, clock)
    return vacancy, late, offered(world, vacancy, second)


def late_accept(offer, **kw):
    return services.offer_late_accept_and_book(clinic=offer.clinic, offer_ref=offer.ref, patient=offer.patient, **kw)


def test_a_yes_after_the_window_books_the_time_while_it_is_still_free(world, frozen_clock):
    offer = expired_offer(world, frozen_clock)
    renewed, booked = late_accept(offer)
    new = renewed.offer
    assert booked.booked and new.renews_id == offer.pk and new.status == OfferStatus.ACCEPTED
    appointment = Appointment.objects.get(ref=booked.appointment_ref)
    assert appointment.status == AppointmentStatus.CONFIRMED and appointment.patient_id == offer.patient_id
    assert Vacancy.objects.get(pk=offer.vacancy_id).status == VacancyStatus.FILLED
    offer.entry.refresh_from_db()
    assert offer.entry.status == EntryStatus.BOOKED
    # No offer notice for the new offer (the patient is answering); the booking confirmation is their message.
    assert not OutboxMessage.objects.filter(aggregate_ref=new.ref, topic="waitlist.offer_made").exists()
    assert OutboxMessage.objects.filter(topic="waitlist.booking_confirmed", recipient_ref=offer.patient.ref).exists()
    assert AuditEntry.objects.filter(action="waitlist.offer_late_accept", target_ref=new.ref,
                                     reason="LATE_ACCEPTED").exists()


def test_a_repeated_late_accept_answers_with_the_same_booking(world, frozen_clock):
    offer = expired_offer(world, frozen_clock)
    first, booked = late_accept(offer)
    again, booked_again = late_accept(offer)
    assert again.offer.pk == first.offer.pk and booked_again.appointment_ref == booked.appointment_ref
    assert Offer.objects.filter(vacancy_id=offer.vacancy_id).count() == 2
    assert Appointment.objects.filter(patient_id=offer.patient_id, status=AppointmentStatus.CONFIRMED,
                                      starts_at=seoul(3, 10)).count() == 1


def test_an_offer_past_its_deadline_is_expired_and_taken_up_before_the_expiry_job_runs(world, frozen_clock):
    entry = world.waiting()
    offer = offered(world, open_vacancy(world, seoul(3, 10)), entry)
    frozen_clock.move_to(offer.expires_at + timedelta(minutes=5))
    renewed, booked = late_accept(offer)
    offer.refresh_from_db()
    assert offer.status == OfferStatus.EXPIRED and offer.reason_code == "EXPIRED"
    assert booked.booked and renewed.offer.renews_id == offer.pk


def test_a_late_yes_is_refused_within_the_answer_margin_and_changes_nothing(world, frozen_clock):
    offer = expired_offer(world, frozen_clock)
    frozen_clock.move_to(seoul(3, 10) - timedelta(minutes=59))  # the default margin is 60 minutes
    before = Offer.objects.count(), OfferEvent.objects.count()
    with pytest.raises(Conflict) as refused:
        late_accept(offer)
    assert refused.value.code == "SLOT_TOO_SOON"
    assert (Offer.objects.count(), OfferEvent.objects.count()) == before


def test_a_clinic_can_switch_late_accepts_off(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, late_accept=False)
    offer = expired_offer(world, frozen_clock)
    with pytest.raises(Conflict) as refused:
        late_accept(offer)
    assert refused.value.code == "LATE_ACCEPT_OFF"


def test_a_declined_offer_cannot_be_accepted_late(world, frozen_clock):
    entry = world.waiting()
    offer = offered(world, open_vacancy(world, seoul(3, 10)), entry)
    services.offer_decline(clinic=world.clinic, offer_ref=offer.ref, patient=offer.patient, reason="PATIENT_DECLINED")
    with pytest.raises(Conflict) as refused:
        late_accept(offer)
    assert refused.value.code == "LATE_ACCEPT_NOT_APPLICABLE"


def test_the_weekly_cap_and_a_pause_after_a_decline_do_not_turn_a_late_yes_away(world, frozen_clock):
    """The contact limits bound what the list asks of a patient; here the patient is the one asking."""
    services.policy_publish(clinic=world.clinic, weekly_offer_cap=1)
    offer = expired_offer(world, frozen_clock)  # the week's one offer is spent
    renewed, booked = late_accept(offer)
    assert booked.booked


def test_a_yes_while_the_time_is_offered_to_someone_else_is_kept_and_taken_up_when_that_offer_ends(
        world, frozen_clock):
    vacancy, late, other = offered_to_the_next(world, frozen_clock)

    kept, booked = late_accept(late)
    assert kept.kept and not booked.booked
    vacancy.refresh_from_db()
    assert vacancy.late_yes_offer_id == late.pk
    assert OfferEvent.objects.filter(offer=late, reason_code="LATE_YES_KEPT").exists()

    services.offer_decline(clinic=world.clinic, offer_ref=other.ref, patient=other.patient, reason="PATIENT_DECLINED")
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "BOOKED" and result.offer.renews_id == late.pk
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.FILLED and vacancy.late_yes_offer_id is None
    assert Appointment.objects.get(source_hold__offer=result.offer).patient_id == late.patient_id


def test_a_kept_yes_is_dropped_when_it_no_longer_fits_and_the_list_goes_on(world, frozen_clock):
    vacancy, late, other = offered_to_the_next(world, frozen_clock, also_waiting=1)
    third = WaitlistEntry.objects.get(priority_rank=0, clinic=world.clinic)
    assert late_accept(late)[0].kept
    services.entry_withdraw(clinic=world.clinic, entry_ref=late.entry.ref, actor=world.staff, reason="no longer needed")
    services.offer_decline(clinic=world.clinic, offer_ref=other.ref, patient=other.patient, reason="PATIENT_DECLINED")
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == third.pk and result.offer.renews_id is None
    vacancy.refresh_from_db()
    assert vacancy.late_yes_offer_id is None


def test_a_second_late_yes_while_one_is_kept_is_refused(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, **LIMITS_OFF)
    a, b, c = (world.waiting(priority_rank=r) for r in (5, 4, 1))
    vacancy = open_vacancy(world, seoul(3, 10))
    first = offered(world, vacancy, a)
    let_expire(first, frozen_clock)
    second = offered(world, vacancy, b)
    let_expire(second, frozen_clock)
    offered(world, vacancy, c)
    assert late_accept(first)[0].kept
    with pytest.raises(Conflict) as refused:
        late_accept(second)
    assert refused.value.code == "SLOT_OFFERED"


def test_the_ended_page_offers_the_still_free_time_and_takes_it(world, frozen_clock):
    offer = expired_offer(world, frozen_clock)
    client = page_client()
    page = client.get(claim_path(offer))
    html = page.content.decode()
    assert page.status_code == 410 and 'data-testid="still-free"' in html and 'data-testid="accept-late"' in html
    booked = submit(client, claim_path(offer), "accept")
    html = booked.content.decode()
    assert booked.status_code == 200 and 'data-testid="still-free"' not in html
    assert "confirmed" in html.lower()
    assert_no_pii(html, [offer.patient])
    # The link now stands for the booking (a reload does not say "ended").
    again = client.get(claim_path(offer))
    assert again.status_code == 200 and again.content.decode().count("confirmed") >= 1


def test_the_ended_page_says_the_patient_is_next_in_line_while_someone_else_is_asked(world, frozen_clock):
    vacancy, late, _other = offered_to_the_next(world, frozen_clock)
    client = page_client()
    assert 'data-testid="next-in-line"' in client.get(claim_path(late)).content.decode()
    kept = submit(client, claim_path(late), "accept").content.decode()
    assert 'data-testid="kept"' in kept and 'data-testid="accept-late"' not in kept


def test_the_ended_page_offers_nothing_once_the_time_is_filled(world, frozen_clock):
    vacancy, late, other = offered_to_the_next(world, frozen_clock)
    services.offer_claim_and_book(offer=Offer.objects.select_related("policy", "patient", "clinic").get(pk=other.pk))
    html = page_client().get(claim_path(late)).content.decode()
    assert 'data-testid="accept-late"' not in html and 'data-testid="next-in-line"' not in html


def test_staff_take_up_a_late_yes_by_api_on_the_patients_word(world, frozen_clock):
    offer = expired_offer(world, frozen_clock)
    url = f"/api/v1/clinics/{world.clinic.ref}/offers/{offer.ref}/late-accept"
    response = token_client(world.staff).post(url, HTTP_IDEMPOTENCY_KEY="late-1")
    body = response.json()
    assert response.status_code == 200, body
    new = Offer.objects.get(renews=offer)
    assert body["offer"] == new.ref and body["renews"] == offer.ref and body["status"] == "ACCEPTED"
    assert body["appointment"] == Appointment.objects.get(source_hold__offer=new).ref
    assert_no_pii(json.dumps(body), [offer.patient])


def test_a_late_accept_of_another_clinics_offer_is_404_like_a_missing_one(world, frozen_clock):
    from tests.worlds import waitlist_world

    offer = expired_offer(world, frozen_clock)
    other = waitlist_world()
    client = token_client(other.staff)
    foreign = client.post(f"/api/v1/clinics/{other.clinic.ref}/offers/{offer.ref}/late-accept")
    missing = client.post(f"/api/v1/clinics/{other.clinic.ref}/offers/OF-NOPE/late-accept")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json() and foreign.json()["code"] == "NOT_FOUND"
    assert not Offer.objects.filter(renews=offer).exists()


def test_the_api_says_kept_while_the_time_is_offered_to_someone_else_and_the_offer_names_what_it_renews(
        world, frozen_clock):
    vacancy, late, other = offered_to_the_next(world, frozen_clock)
    client = token_client(world.staff)
    base = f"/api/v1/clinics/{world.clinic.ref}/offers"
    kept = client.post(f"{base}/{late.ref}/late-accept", HTTP_IDEMPOTENCY_KEY="late-2").json()
    assert kept["status"] == "KEPT" and kept["appointment"] is None and kept["offer"] == late.ref
    services.offer_decline(clinic=world.clinic, offer_ref=other.ref, patient=other.patient, reason="PATIENT_DECLINED")
    taken = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer
    detail = client.get(f"{base}/{taken.ref}").json()
    assert detail["renews"] == late.ref and detail["status"] == "ACCEPTED" and detail["appointment"]


def test_a_late_yes_is_refused_while_the_clinics_waiting_list_is_off(world, frozen_clock):
    from scheduling.services.features import feature_set

    offer = expired_offer(world, frozen_clock)
    feature_set(name="waitlist", actor=None, reason="paused", clinic=world.clinic, clinic_enabled=False)
    before = Offer.objects.count()
    with pytest.raises(Conflict) as refused:
        late_accept(offer)
    assert refused.value.code == "WAITLIST_DISABLED" and Offer.objects.count() == before
    assert 'data-testid="accept-late"' not in page_client().get(claim_path(offer)).content.decode()


def test_a_late_yes_for_a_time_someone_else_accepted_is_not_kept(world, frozen_clock):
    vacancy, late, other = offered_to_the_next(world, frozen_clock)
    services.offer_claim_and_book(offer=Offer.objects.select_related("policy", "patient", "clinic").get(pk=other.pk))
    with pytest.raises(Conflict) as refused:
        late_accept(late)
    assert refused.value.code == "SLOT_GONE"
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.FILLED and vacancy.late_yes_offer_id is None
    assert not OfferEvent.objects.filter(offer=late, reason_code="LATE_YES_KEPT").exists()


def test_a_late_accept_puts_a_patient_asked_last_back_in_their_place(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, unanswered_ask_last_after=1)
    offer = expired_offer(world, frozen_clock)
    offer.entry.refresh_from_db()
    assert offer.entry.asked_last_since is not None
    late_accept(offer)
    offer.entry.refresh_from_db()
    assert offer.entry.asked_last_since is None


def test_a_kept_yes_that_no_longer_applies_is_dropped_with_an_event_and_the_page_stops_promising(
        world, frozen_clock):
    vacancy, late, other = offered_to_the_next(world, frozen_clock)
    assert late_accept(late)[0].kept
    services.entry_withdraw(clinic=world.clinic, entry_ref=late.entry.ref, actor=world.staff, reason="not needed")
    assert 'data-testid="kept"' not in page_client().get(claim_path(late)).content.decode()
    services.offer_decline(clinic=world.clinic, offer_ref=other.ref, patient=other.patient, reason="PATIENT_DECLINED")
    services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    dropped = OfferEvent.objects.get(offer=late, reason_code="LATE_YES_DROPPED")
    assert dropped.actor == "system:dispatch" and dropped.detail["refusal"] == "ENTRY_NOT_WAITING"


def test_dispatch_takes_a_kept_yes_up_as_the_dispatcher_not_as_the_patient(world, frozen_clock):
    vacancy, late, other = offered_to_the_next(world, frozen_clock)
    late_accept(late)
    services.offer_decline(clinic=world.clinic, offer_ref=other.ref, patient=other.patient, reason="PATIENT_DECLINED")
    taken = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer
    assert OfferEvent.objects.get(offer=taken, reason_code="MATCHED").actor == "system:dispatch"


def test_a_reopened_vacancy_forgets_a_late_yes_kept_before_it_closed(world, frozen_clock):
    from scheduling.models import Role
    from tests.factories import user_with_role

    vacancy, late, _other = offered_to_the_next(world, frozen_clock)
    late_accept(late)
    admin = user_with_role(world.clinic, Role.ADMIN)
    services.vacancy_close(clinic=world.clinic, vacancy_ref=vacancy.ref, actor=admin, reason="clinic closed")
    services.vacancy_reopen(clinic=world.clinic, vacancy_ref=vacancy.ref, actor=admin, reason="open after all")
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.OPEN and vacancy.late_yes_offer_id is None
