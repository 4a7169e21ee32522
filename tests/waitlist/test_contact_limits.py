"""Contact limits that bound what a patient receives without removing the patients who answer: a decline
holds back offers like the declined one only, and the weekly cap restarts when the patient accepts."""

from __future__ import annotations

from tests.conftest import seoul
from tests.waitlist.loop_helpers import open_vacancy
from tests.waitlist.test_matcher import ranked, vacancy_for
from waitlist import services
from waitlist.models import EntryStatus, Offer, SuppressionScope, WaitlistEntry


def declined_morning_offer(world):
    """The only waiting patient declines a 10:00 slot with ``world.doctor``."""
    entry = world.waiting()
    vacancy = open_vacancy(world, seoul(3, 10))
    offer = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer
    services.offer_decline(clinic=world.clinic, offer_ref=offer.ref, reason="TIME_NOT_SUITABLE")
    entry.refresh_from_db()
    assert entry.status == EntryStatus.WAITING
    return entry


def test_a_decline_holds_back_offers_of_the_same_practitioner_and_part_of_the_day(world):
    declined_morning_offer(world)
    same = open_vacancy(world, seoul(4, 9, 30))
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=same.ref).outcome == "NO_CANDIDATE"


def test_a_decline_leaves_afternoon_slots_and_other_practitioners_open(world):
    entry = declined_morning_offer(world)
    afternoon = open_vacancy(world, seoul(4, 15))
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=afternoon.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == entry.pk


def test_a_decline_leaves_the_other_practitioners_morning_open(world):
    entry = declined_morning_offer(world)
    other = open_vacancy(world, seoul(4, 10), practitioner=world.other_doctor)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=other.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == entry.pk


def test_the_all_scope_holds_back_every_offer_after_a_decline(world):
    services.policy_publish(clinic=world.clinic, decline_suppression_scope=SuppressionScope.ALL)
    entry = declined_morning_offer(world)
    assert entry.suppressed_like_start is None and entry.suppressed_practitioner_id is None
    afternoon = open_vacancy(world, seoul(4, 15), practitioner=world.other_doctor)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=afternoon.ref).outcome == "NO_CANDIDATE"


def test_the_part_of_the_day_is_read_in_the_clinics_time_zone(world):
    # 11:30 in Seoul is 02:30 UTC: both mornings locally, so the decline holds it back.
    declined_morning_offer(world)
    assert ranked(world, vacancy_for(world, seoul(4, 11, 30)))[0] == []
    assert ranked(world, vacancy_for(world, seoul(4, 12)))[0] != []


def test_the_weekly_cap_restarts_when_the_patient_accepts(world):
    patient = world.patient()
    entry = world.waiting(patient)
    first = open_vacancy(world, seoul(3, 10))
    services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=first.ref)
    services.offer_withdraw(clinic=world.clinic, offer_ref=Offer.objects.get(vacancy=first).ref,
                            actor=world.staff, reason="test")
    assert ranked(world, vacancy_for(world, seoul(4, 10)), weekly_offer_cap=1)[0] == []
    # The same patient accepts an offer made on another entry of theirs.
    other_entry = world.waiting(patient, treatment=world.other_treatment)
    WaitlistEntry.objects.filter(pk=entry.pk).update(status=EntryStatus.WITHDRAWN)
    second = open_vacancy(world, seoul(3, 15), treatment=world.other_treatment)
    offer = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=second.ref).offer
    assert offer.entry_id == other_entry.pk
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=offer.version)
    WaitlistEntry.objects.filter(pk=entry.pk).update(status=EntryStatus.WAITING)
    assert ranked(world, vacancy_for(world, seoul(4, 10)), weekly_offer_cap=1)[0] == [entry.pk]
