"""Booking and cancelling: the exclusion constraint is the judge of capacity."""

from __future__ import annotations

from datetime import timedelta

import pytest

from common.errors import SlotOccupied, VersionConflict
from scheduling.models import Appointment, AppointmentStatus, CapacityAllocation
from scheduling.services import (
    HeldReplacement,
    appointment_book,
    appointment_cancel,
    appointment_move,
    appointment_set_status,
    appointments_replace_held,
)
from tests import factories as f
from tests.conftest import race, seoul


def book(clinic, patient, practitioner, treatment, starts_at, status="CONFIRMED", resource=None):
    return appointment_book(
        clinic=clinic,
        patient=patient,
        practitioner=practitioner,
        treatment=treatment,
        resource=resource,
        starts_at=starts_at,
        status=status,
    )


def test_overlapping_confirmed_booking_is_slot_occupied(clinic, practitioner, treatment):
    book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10))
    with pytest.raises(SlotOccupied):
        book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10, 15))
    assert Appointment.objects.count() == 1


def test_back_to_back_slots_do_not_overlap(clinic, practitioner, treatment):
    book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10))
    book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10, 30))
    assert CapacityAllocation.objects.filter(active=True).count() == 2


def test_proposed_appointments_reserve_no_capacity(clinic, practitioner, treatment):
    book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10), status="PROPOSED")
    book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10), status="HELD")
    assert CapacityAllocation.objects.filter(active=True).count() == 1


def test_one_resource_cannot_be_double_booked_across_practitioners(clinic, treatment, resource):
    book(
        clinic,
        f.PatientFactory(clinic=clinic),
        f.PractitionerFactory(clinic=clinic),
        treatment,
        seoul(3, 10),
        resource=resource,
    )
    with pytest.raises(SlotOccupied):
        book(
            clinic,
            f.PatientFactory(clinic=clinic),
            f.PractitionerFactory(clinic=clinic),
            treatment,
            seoul(3, 10, 10),
            resource=resource,
        )


def test_cancel_frees_the_slot(clinic, practitioner, treatment):
    first = book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10))
    cancelled = appointment_cancel(clinic=clinic, appointment_ref=first.ref, reason="patient request")
    assert cancelled.status == AppointmentStatus.CANCELLED and cancelled.previous_status == "CONFIRMED"
    book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10))


def test_cancel_with_a_stale_version_is_a_conflict_and_changes_nothing(clinic, practitioner, treatment):
    appointment = book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10))
    stale_version = appointment.version
    Appointment.objects.filter(pk=appointment.pk).update(version=stale_version + 1)
    with pytest.raises(VersionConflict):
        appointment_cancel(
            clinic=clinic, appointment_ref=appointment.ref, reason="x", expected_version=stale_version
        )
    appointment.refresh_from_db()
    assert appointment.status == AppointmentStatus.CONFIRMED
    assert CapacityAllocation.objects.filter(appointment=appointment, active=True).exists()


def test_held_to_proposed_releases_and_back_to_held_reallocates(clinic, practitioner, treatment):
    appointment = book(
        clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10), status="HELD"
    )
    appointment_set_status(clinic=clinic, appointment_ref=appointment.ref, target="PROPOSED")
    assert not CapacityAllocation.objects.filter(appointment=appointment, active=True).exists()
    appointment_set_status(clinic=clinic, appointment_ref=appointment.ref, target="HELD")
    assert CapacityAllocation.objects.filter(appointment=appointment, active=True).count() == 1


def test_moving_a_held_appointment_onto_a_taken_slot_changes_nothing(clinic, practitioner, treatment):
    book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 11))
    held = book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10), status="HELD")
    with pytest.raises(SlotOccupied):
        appointment_move(clinic=clinic, appointment_ref=held.ref, starts_at=seoul(3, 11))
    held.refresh_from_db()
    assert held.starts_at == seoul(3, 10)
    assert CapacityAllocation.objects.get(appointment=held, active=True).period.lower == seoul(3, 10)


def test_moving_a_confirmed_appointment_is_refused(clinic, practitioner, treatment):
    confirmed = book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, 10))
    with pytest.raises(Exception) as info:
        appointment_move(clinic=clinic, appointment_ref=confirmed.ref, starts_at=seoul(3, 12))
    assert getattr(info.value, "code", "") == "APPOINTMENT_NOT_MOVABLE"


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_bookings_for_one_practitioner_admit_exactly_one():
    clinic = f.ClinicFactory()
    practitioner = f.PractitionerFactory(clinic=clinic)
    treatment = f.TreatmentFactory(clinic=clinic, duration_minutes=30)
    patients = [f.PatientFactory(clinic=clinic) for _ in range(10)]

    def attempt(i):
        start = seoul(5, 9) + timedelta(minutes=i)  # every slot overlaps every other
        return book(
            clinic, patients[i], practitioner, treatment, start, status="HELD" if i % 2 else "CONFIRMED"
        )

    results = race(attempt, 10)
    winners = [r for r in results if isinstance(r, Appointment)]
    losers = [r for r in results if isinstance(r, SlotOccupied)]
    assert len(winners) == 1 and len(losers) == 9, results
    assert CapacityAllocation.objects.filter(active=True).count() == 1


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_bookings_for_one_resource_admit_exactly_one():
    clinic = f.ClinicFactory()
    resource = f.ResourceFactory(clinic=clinic)
    treatment = f.TreatmentFactory(clinic=clinic, duration_minutes=30)
    practitioners = [f.PractitionerFactory(clinic=clinic) for _ in range(10)]
    patients = [f.PatientFactory(clinic=clinic) for _ in range(10)]

    def attempt(i):
        return book(clinic, patients[i], practitioners[i], treatment, seoul(5, 9), resource=resource)

    results = race(attempt, 10)
    assert sum(isinstance(r, Appointment) for r in results) == 1, results
    assert sum(isinstance(r, SlotOccupied) for r in results) == 9, results


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_cancels_of_one_appointment_cancel_once():
    clinic = f.ClinicFactory()
    appointment = book(
        clinic,
        f.PatientFactory(clinic=clinic),
        f.PractitionerFactory(clinic=clinic),
        f.TreatmentFactory(clinic=clinic),
        seoul(5, 9),
    )
    version = appointment.version

    results = race(
        lambda i: appointment_cancel(
            clinic=clinic, appointment_ref=appointment.ref, reason="r", expected_version=version
        ),
        8,
    )
    assert sum(isinstance(r, Appointment) for r in results) == 1, results
    appointment.refresh_from_db()
    assert appointment.version == version + 1


def _replacements(held, practitioner, treatment):
    return [HeldReplacement(appointment=a, practitioner=practitioner, treatment=treatment, resource=None,
                            reason="moved", reason_code="RESCHEDULED", cancelled_by="system:test") for a in held]


def _two_holds(clinic, practitioner, treatment):
    return [
        book(clinic, f.PatientFactory(clinic=clinic), practitioner, treatment, seoul(3, hour), "HELD")
        for hour in (9, 11)
    ]


def test_replacing_holds_together_cancels_each_and_books_its_replacement(clinic, practitioner, treatment):
    held = _two_holds(clinic, practitioner, treatment)
    other = f.PractitionerFactory(clinic=clinic)
    booked = appointments_replace_held(replacements=_replacements(held, other, treatment))
    assert [(a.status, a.practitioner_id, a.starts_at, a.patient_id) for a in booked] == [
        (AppointmentStatus.HELD, other.pk, h.starts_at, h.patient_id) for h in held]
    assert set(Appointment.objects.filter(pk__in=[h.pk for h in held]).values_list("status", flat=True)) == {
        AppointmentStatus.CANCELLED}
    assert set(CapacityAllocation.objects.filter(active=True).values_list("appointment_id", flat=True)) == {
        a.pk for a in booked}


def test_replacing_holds_together_writes_nothing_when_one_was_changed(clinic, practitioner, treatment):
    held = _two_holds(clinic, practitioner, treatment)
    appointment_set_status(clinic=clinic, appointment_ref=held[1].ref, target="CONFIRMED")
    with pytest.raises(VersionConflict):
        appointments_replace_held(replacements=_replacements(held, f.PractitionerFactory(clinic=clinic), treatment))
    assert list(Appointment.objects.order_by("pk").values_list("status", flat=True)) == ["HELD", "CONFIRMED"]
    assert CapacityAllocation.objects.filter(active=True).count() == 2


def test_replacing_holds_together_writes_nothing_when_one_slot_is_taken(clinic, practitioner, treatment):
    held = _two_holds(clinic, practitioner, treatment)
    other = f.PractitionerFactory(clinic=clinic)
    book(clinic, f.PatientFactory(clinic=clinic), other, treatment, seoul(3, 11))
    with pytest.raises(SlotOccupied):
        appointments_replace_held(replacements=_replacements(held, other, treatment))
    assert sorted(Appointment.objects.values_list("status", flat=True)) == ["CONFIRMED", "HELD", "HELD"]
    assert CapacityAllocation.objects.filter(active=True).count() == 3
