"""Staff review's PROMOTE of a candidate who said "book me automatically" (issue 44 §6): the same standing
decision as dispatch (``standing.standing_applies``), so the patient is booked, or offered with the reason kept."""

from __future__ import annotations

from common.models import AuditEntry, OutboxMessage
from scheduling.models import Appointment, AppointmentStatus, HoldStatus
from tests.conftest import seoul
from tests.waitlist.loop_helpers import review_vacancy
from waitlist import services
from waitlist.models import OFFER_TOPIC, BookingAck, EntryStatus, OfferEvent, OfferStatus, VacancyStatus
from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC


def grant(world, entry, **kw):
    return services.standing_acceptance_record(clinic=world.clinic, entry_ref=entry.ref, state="GRANTED",
                                               source="API", actor=world.staff, **kw)


def promote(world, vacancy):
    return services.vacancy_review_resolve(clinic=world.clinic, vacancy_ref=vacancy.ref, resolution="PROMOTE",
                                           actor=world.staff, reason="decision service is lagging")


def test_promoting_a_standing_candidate_books_them_as_dispatch_would(world):
    vacancy, entry = review_vacancy(world)
    grant(world, entry)
    result = promote(world, vacancy)
    assert result.outcome == "BOOKED"
    offer = result.offer
    offer.refresh_from_db()
    entry.refresh_from_db()
    assert offer.standing and offer.staff_reviewed and offer.status == OfferStatus.ACCEPTED
    assert offer.release_until is not None and offer.hold.status == HoldStatus.CONSUMED
    assert entry.status == EntryStatus.BOOKED and result.vacancy.status == VacancyStatus.FILLED
    appointment = Appointment.objects.get(pk=offer.hold.appointment_id)
    assert appointment.status == AppointmentStatus.CONFIRMED and appointment.patient_id == entry.patient_id
    reasons = list(OfferEvent.objects.filter(offer=offer).order_by("id").values_list("reason_code", flat=True))
    assert reasons == ["MATCHED", "STANDING_ACCEPTED", "BOOKED", "STAFF_REVIEWED"]
    assert not OutboxMessage.objects.filter(topic=OFFER_TOPIC, aggregate_ref=offer.ref).exists()
    audit = AuditEntry.objects.get(action="waitlist.vacancy_review_resolve")
    assert audit.result["outcome"] == "BOOKED" and audit.result["standing"] == "BOOKED"
    # Booked automatically like any standing booking: it counts once seen (issue 39), its notice is "you are booked".
    ack = BookingAck.objects.get(offer=offer)
    assert ack.acknowledged_at is None and ack.booked_at < ack.remind_at < ack.release_at <= offer.release_until
    assert OutboxMessage.objects.filter(topic=BOOKING_CONFIRMED_TOPIC, payload__offer=offer.ref).exists()


def test_a_standing_candidate_inside_their_minimum_notice_is_offered_and_the_review_says_why(world):
    vacancy, entry = review_vacancy(world, starts_at=seoul(3, 10))
    grant(world, entry, min_notice_minutes=3 * 24 * 60)  # the slot is two days away
    result = promote(world, vacancy)
    assert result.outcome == "OFFERED" and not result.offer.standing
    reviewed = OfferEvent.objects.get(offer=result.offer, reason_code="STAFF_REVIEWED")
    assert reviewed.detail["standing"] == "MIN_NOTICE"
    events = list(OfferEvent.objects.filter(offer=result.offer).order_by("id").values_list("reason_code", flat=True))
    assert events == ["MATCHED", "STANDING_MIN_NOTICE", "STAFF_REVIEWED"]


def test_a_clinic_without_standing_acceptance_gets_an_ordinary_offer_and_the_reason(world):
    services.policy_publish(clinic=world.clinic, standing_acceptance=False)
    vacancy, entry = review_vacancy(world)
    grant(world, entry)
    result = promote(world, vacancy)
    assert result.outcome == "OFFERED" and not result.offer.standing
    reviewed = OfferEvent.objects.get(offer=result.offer, reason_code="STAFF_REVIEWED")
    assert reviewed.detail["standing"] == "POLICY_OFF"
    assert OfferEvent.objects.filter(offer=result.offer, reason_code="STANDING_POLICY_OFF").exists()


def test_a_candidate_without_standing_acceptance_records_none(world):
    vacancy, _entry = review_vacancy(world)
    result = promote(world, vacancy)
    assert result.outcome == "OFFERED"
    reviewed = OfferEvent.objects.get(offer=result.offer, reason_code="STAFF_REVIEWED")
    assert "standing" not in reviewed.detail
    assert not OfferEvent.objects.filter(offer=result.offer, reason_code__startswith="STANDING_").exists()
