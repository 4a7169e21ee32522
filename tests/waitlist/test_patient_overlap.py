"""A patient is never offered (or booked) a time that overlaps their own holds and HELD/CONFIRMED visits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from common.errors import PatientOverlap, SlotOccupied
from scheduling.models import AppointmentStatus, CapacityHold
from scheduling.services import appointment_book, hold_place
from tests.conftest import race, seoul, token_client
from tests.waitlist.loop_helpers import open_vacancy
from waitlist import services
from waitlist.dispatch import matcher
from waitlist.models import ACTIVE_OFFER_STATUSES, Offer


def _book(world, patient, starts_at, practitioner):
    return appointment_book(clinic=world.clinic, patient=patient, practitioner=practitioner,
                            treatment=world.treatment, starts_at=starts_at, status=AppointmentStatus.CONFIRMED)


def test_a_second_overlapping_appointment_of_one_patient_is_patient_overlap(world):
    patient = world.patient()
    _book(world, patient, seoul(3, 10), world.doctor)
    with pytest.raises(PatientOverlap):
        _book(world, patient, seoul(3, 10, 15), world.other_doctor)


def test_back_to_back_appointments_of_one_patient_are_fine(world):
    patient = world.patient()
    _book(world, patient, seoul(3, 10), world.doctor)
    assert _book(world, patient, seoul(3, 10, 30), world.other_doctor).status == AppointmentStatus.CONFIRMED


def test_the_api_answers_a_patient_overlap_with_its_code(world):
    patient = world.patient()
    _book(world, patient, seoul(3, 10), world.doctor)
    response = token_client(world.staff).post(f"/api/v1/clinics/{world.clinic.ref}/appointments/", {
        "patient": patient.ref, "practitioner": world.other_doctor.ref, "treatment": world.treatment.ref,
        "starts_at": seoul(3, 10).isoformat(), "status": "HELD"}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "PATIENT_OVERLAP"


def test_the_matcher_passes_over_a_patient_booked_at_an_overlapping_time_with_a_reason(world):
    busy = world.patient()
    busy_entry = world.waiting(busy, priority_rank=9)
    free_entry = world.waiting(priority_rank=1)
    vacancy = open_vacancy(world, seoul(3, 10))
    _book(world, busy, seoul(3, 10), world.other_doctor)
    stats = matcher.MatchStats()
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.offer.entry_id == free_entry.pk
    policy = services.policy_current(clinic=world.clinic)
    list(matcher.candidates(vacancy=vacancy, policy=policy, provider=_NoDecisions(), now=seoul(1, 9), stats=stats))
    assert (busy_entry.ref, "PATIENT_OVERLAP") in [p[1:] for p in stats.passed_over]
    assert matcher.ineligibility(entry=busy_entry, vacancy=vacancy, policy=policy, now=seoul(1, 9)) == "PATIENT_OVERLAP"


class _NoDecisions:
    def decisions_for(self, *, clinic, patient_ids):
        return {}


def test_one_patient_is_never_offered_two_overlapping_vacancies(world):
    patient = world.patient()
    world.waiting(patient, treatment=world.treatment, priority_rank=5)
    world.waiting(patient, treatment=world.other_treatment, priority_rank=5)
    first = open_vacancy(world, seoul(3, 10))
    second = open_vacancy(world, seoul(3, 10), practitioner=world.other_doctor, treatment=world.other_treatment)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=first.ref).outcome == "OFFERED"
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=second.ref).outcome == "NO_CANDIDATE"
    assert Offer.objects.filter(patient=patient, status__in=ACTIVE_OFFER_STATUSES).count() == 1


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_holds_for_one_patient_at_overlapping_times_leave_one_and_refuse_the_other(world):
    patient = world.patient()
    doctors = [world.doctor, world.other_doctor]

    def place(i):
        starts = seoul(3, 10) + timedelta(minutes=10 * i)
        return hold_place(clinic=world.clinic, practitioner_id=doctors[i].pk, treatment_id=world.treatment.pk,
                          resource_id=None, patient_id=patient.pk, starts_at=starts,
                          ends_at=starts + timedelta(minutes=30), expires_at=seoul(3, 9))

    results = race(place, 2)
    assert sum(isinstance(r, CapacityHold) for r in results) == 1, results
    refused = [r for r in results if not isinstance(r, CapacityHold)]
    assert isinstance(refused[0], PatientOverlap) and refused[0].code == "PATIENT_OVERLAP"
    assert CapacityHold.objects.filter(patient=patient).count() == 1


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_dispatches_of_overlapping_vacancies_offer_one_patient_once(world):
    patient = world.patient()
    world.waiting(patient, treatment=world.treatment, priority_rank=5)
    world.waiting(patient, treatment=world.other_treatment, priority_rank=5)
    vacancies = [open_vacancy(world, seoul(3, 10)),
                 open_vacancy(world, seoul(3, 10, 15), practitioner=world.other_doctor,
                              treatment=world.other_treatment)]

    results = race(lambda i: services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancies[i].ref), 2)

    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sorted(r.outcome for r in results) == ["NO_CANDIDATE", "OFFERED"]
    assert Offer.objects.filter(patient=patient, status__in=ACTIVE_OFFER_STATUSES).count() == 1


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_bookings_for_one_patient_book_one_and_refuse_the_other_typed(world):
    patient = world.patient()
    doctors = [world.doctor, world.other_doctor]
    results = race(lambda i: _book(world, patient, seoul(3, 10, 5 * i), doctors[i]), 2)
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], SlotOccupied) and refused[0].code == "PATIENT_OVERLAP"
