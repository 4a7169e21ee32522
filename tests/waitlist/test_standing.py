"""Standing acceptance: recorded like consent, booked by dispatch in one command, released by the patient with
the slot reopened and the cascade after it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from common.errors import Conflict, NotFound, ValidationFailed
from common.models import AuditEntry, OutboxMessage
from scheduling.models import Appointment, AppointmentStatus, HoldStatus
from tests.conftest import seoul
from tests.waitlist.factories import NOW
from tests.waitlist.loop_helpers import open_vacancy
from tests.waitlist.test_matcher import ranked, vacancy_for
from waitlist import services
from waitlist.models import (
    OFFER_TOPIC,
    EntryStatus,
    Offer,
    OfferEvent,
    OfferStatus,
    StandingAcceptance,
    Vacancy,
    VacancyStatus,
)


def grant(world, entry, **kw):
    kw.setdefault("source", "API")
    return services.standing_acceptance_record(clinic=world.clinic, entry_ref=entry.ref, state="GRANTED",
                                               actor=world.staff, **kw)


def booked(world, entry, starts_at=None):
    grant(world, entry)
    vacancy = open_vacancy(world, starts_at or seoul(3, 10))
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "BOOKED", result.outcome
    return vacancy, result.offer


def test_a_grant_and_a_revoke_are_appended_and_the_newest_is_current(world):
    entry = world.waiting()
    grant(world, entry, min_notice_minutes=600)
    services.standing_acceptance_record(clinic=world.clinic, entry_ref=entry.ref, state="REVOKED",
                                        source="NOTICE_LINK")
    rows = list(StandingAcceptance.objects.filter(entry=entry).order_by("id").values_list("state", "actor"))
    assert rows == [("GRANTED", world.staff.username), ("REVOKED", "patient")]
    assert AuditEntry.objects.filter(action="waitlist.standing_acceptance", target_ref=entry.ref).count() == 2
    with pytest.raises(TypeError):
        StandingAcceptance.objects.filter(entry=entry).delete()


def test_staff_must_say_how_the_patient_agreed(world):
    entry = world.waiting()
    with pytest.raises(ValidationFailed) as refused:
        grant(world, entry, source="STAFF")
    assert "reason" in refused.value.fields
    assert not StandingAcceptance.objects.exists()


def test_a_foreign_entry_is_not_found_and_a_closed_one_refused(world):
    from tests.worlds import waitlist_world

    foreign = waitlist_world().waiting()
    with pytest.raises(NotFound):
        grant(world, foreign)
    entry = world.waiting(status=EntryStatus.WITHDRAWN)
    with pytest.raises(Conflict) as refused:
        grant(world, entry)
    assert refused.value.code == "ENTRY_NOT_OPEN" and not StandingAcceptance.objects.exists()


def test_dispatch_books_a_standing_entry_in_one_command_without_an_offer_notice(world):
    entry = world.waiting()
    vacancy, offer = booked(world, entry)
    offer.refresh_from_db()
    entry.refresh_from_db()
    vacancy.refresh_from_db()
    assert offer.standing and offer.status == OfferStatus.ACCEPTED and offer.hold.status == HoldStatus.CONSUMED
    assert entry.status == EntryStatus.BOOKED and vacancy.status == VacancyStatus.FILLED
    appointment = Appointment.objects.get(pk=offer.hold.appointment_id)
    assert appointment.status == AppointmentStatus.CONFIRMED and appointment.patient_id == entry.patient_id
    reasons = list(OfferEvent.objects.filter(offer=offer).order_by("id").values_list("reason_code", flat=True))
    assert reasons == ["MATCHED", "STANDING_ACCEPTED", "BOOKED"]
    assert not OutboxMessage.objects.filter(topic=OFFER_TOPIC, aggregate_ref=offer.ref).exists()
    # Released until 12 h after the booking (the policy's default), well before the slot's lead.
    assert offer.release_until == NOW + timedelta(minutes=720)


def test_a_slot_inside_the_patients_minimum_notice_is_offered_not_booked(world):
    entry = world.waiting()
    grant(world, entry, min_notice_minutes=3 * 24 * 60)
    vacancy = open_vacancy(world, seoul(3, 10))  # two days away
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and not result.offer.standing


def test_a_clinic_that_switches_the_feature_off_makes_ordinary_offers(world):
    services.policy_publish(clinic=world.clinic, standing_acceptance=False)
    entry = world.waiting()
    grant(world, entry)
    vacancy = open_vacancy(world, seoul(3, 10))
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"


def test_a_revoked_standing_acceptance_makes_ordinary_offers(world):
    entry = world.waiting()
    grant(world, entry)
    services.standing_acceptance_record(clinic=world.clinic, entry_ref=entry.ref, state="REVOKED",
                                        source="NOTICE_LINK")
    vacancy = open_vacancy(world, seoul(3, 10))
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"


def test_a_release_reopens_the_slot_and_the_cascade_offers_it_to_the_next_patient(world, queued_dispatches,
                                                                                   on_commit):
    entry = world.waiting()
    vacancy, offer = booked(world, entry)
    second = world.waiting()
    queued_dispatches.clear()
    with on_commit(execute=True):
        released, reopened = services.standing_release(clinic=world.clinic, offer_ref=offer.ref,
                                                       patient=entry.patient)
    entry.refresh_from_db()
    offer.hold.refresh_from_db()
    appointment = Appointment.objects.get(pk=offer.hold.appointment_id)
    assert released.status == OfferStatus.WITHDRAWN and released.reason_code == "STANDING_RELEASED"
    assert appointment.status == AppointmentStatus.CANCELLED
    assert entry.status == EntryStatus.WAITING and entry.suppressed_like_start == vacancy.starts_at
    assert reopened.pk == vacancy.pk and reopened.status == VacancyStatus.OPEN  # the same slot, open again
    assert queued_dispatches == [vacancy.pk]
    cascade = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=reopened.ref)
    assert cascade.outcome == "OFFERED" and cascade.offer.entry_id == second.pk
    assert AuditEntry.objects.filter(action="waitlist.standing_release", target_ref=offer.ref).exists()


def test_a_second_release_answers_the_same_and_opens_nothing_more(world):
    entry = world.waiting()
    _vacancy, offer = booked(world, entry)
    first = services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=entry.patient)
    again = services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=entry.patient)
    assert again[1] == first[1] and again[0].status == OfferStatus.WITHDRAWN
    assert Vacancy.objects.filter(status=VacancyStatus.OPEN).count() == 1
    assert OfferEvent.objects.filter(offer=offer, reason_code="STANDING_RELEASED").count() == 1


def test_a_release_after_its_deadline_is_refused_and_changes_nothing(world, frozen_clock):
    entry = world.waiting()
    _vacancy, offer = booked(world, entry)
    frozen_clock.move_to(offer.release_until)
    with pytest.raises(Conflict) as refused:
        services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=entry.patient)
    assert refused.value.code == "RELEASE_CLOSED"
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED
    assert Vacancy.objects.get().status == VacancyStatus.FILLED


def test_another_patient_cannot_release_the_booking(world):
    entry = world.waiting()
    _vacancy, offer = booked(world, entry)
    with pytest.raises(NotFound):
        services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=world.patient())


def test_a_standing_booking_does_not_count_against_the_weekly_cap(world):
    patient = world.patient()
    entry = world.waiting(patient)
    _vacancy, offer = booked(world, entry)
    services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=patient)
    assert ranked(world, vacancy_for(world, seoul(4, 15)), weekly_offer_cap=1)[0] == [entry.pk]


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_releases_and_dispatches_reopen_the_vacancy_once_with_one_offer():
    from tests.conftest import race
    from tests.worlds import waitlist_world

    world = waitlist_world()
    entry = world.waiting()
    services.standing_acceptance_record(clinic=world.clinic, entry_ref=entry.ref, state="GRANTED", source="API")
    vacancy = open_vacancy(world, seoul(3, 10))
    booking = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert booking.outcome == "BOOKED"
    for _ in range(3):
        world.waiting()

    def release_then_dispatch(_i):
        try:
            services.standing_release(clinic=world.clinic, offer_ref=booking.offer.ref, patient=entry.patient)
        except Conflict:
            pass
        return services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome

    outcomes = race(release_then_dispatch, 4)
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert OfferEvent.objects.filter(offer=booking.offer, reason_code="STANDING_RELEASED").count() == 1
    active = Offer.objects.filter(vacancy=vacancy, status__in=["OFFERED", "ACCEPTED"])
    assert active.count() == 1 and active.get().entry_id != entry.pk
    assert outcomes.count("OFFERED") == 1
    from observability.invariants import check

    assert check().ok


def test_a_standing_booking_sends_one_booked_notice_whose_link_releases_it(world, frozen_clock):
    from tests.waitlist.loop_helpers import LINK, deliver, page_client, submit

    entry = world.waiting(world.patient(language="en"))
    vacancy, offer = booked(world, entry)
    (message,) = OutboxMessage.objects.filter(recipient_ref=entry.patient.ref)
    assert message.topic == "waitlist.booking_confirmed"
    assert message.payload["release_until"] == offer.release_until.isoformat()
    deliver()
    message.refresh_from_db()
    assert message.status == "SENT"
    path = f"/claim/{LINK.search(claim_link_of(offer)).group(1)}/"
    page = page_client().get(path).content.decode()
    assert "You were booked automatically" in page and 'value="release"' in page
    released = submit(page_client(), path, "release")
    assert released.status_code == 200 and "You released this time" in released.content.decode()
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.OPEN


def claim_link_of(offer):
    from waitlist.offers.tokens import claim_link

    return claim_link(offer)


def test_the_declined_page_offers_to_book_automatically_next_time(world):
    from tests.waitlist.loop_helpers import claim_path, make_offer, page_client, submit

    offer = make_offer(world, world.patient(language="en"))
    page = submit(page_client(), claim_path(offer), "decline").content.decode()
    assert 'data-testid="standing-link"' in page and "/standing/" in page


def test_a_release_while_the_patient_waits_again_on_another_entry_ends_the_released_one(world):
    entry = world.waiting()
    _vacancy, offer = booked(world, entry)
    again = world.waiting(entry.patient, earliest=entry.earliest, latest=entry.latest)
    services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=entry.patient)
    entry.refresh_from_db()
    again.refresh_from_db()
    assert entry.status == EntryStatus.WITHDRAWN and again.status == EntryStatus.WAITING
