"""``appointments_apply_changes``: several appointments changed in one command, each change in its own savepoint (a
refused one undone alone), with the statements of the single-appointment commands it stands for."""

from __future__ import annotations

import pytest

from scheduling.models import Appointment, AppointmentStatus, CapacityAllocation
from scheduling.services import (
    ChangeResult,
    HeldReplace,
    HeldReplacement,
    Rebook,
    StatusChange,
    appointment_book,
    appointment_set_status,
    appointments_apply_changes,
)
from tests import factories as f
from tests.conftest import seoul

pytestmark = pytest.mark.django_db


def _book(clinic, practitioner, treatment, hour, status, patient=None):
    return appointment_book(clinic=clinic, patient=patient or f.PatientFactory(clinic=clinic),
                            practitioner=practitioner, treatment=treatment, starts_at=seoul(3, hour), status=status)


def _option(held, practitioner, treatment):
    return HeldReplacement(appointment=held, practitioner=practitioner, treatment=treatment, resource=None,
                           reason="moved", reason_code="RESCHEDULED", cancelled_by="system:test")


def _rebook(proposed, practitioner, treatment):
    return Rebook(appointment=proposed, practitioner=practitioner, treatment=treatment, resource=None,
                  reason="moved", reason_code="RESCHEDULED", cancelled_by="system:test")


def _status(appointment) -> str:
    return Appointment.objects.get(pk=appointment.pk).status


def test_every_kind_of_change_is_carried_out_in_order(clinic, practitioner, treatment):
    proposed = _book(clinic, practitioner, treatment, 9, "PROPOSED")
    held = _book(clinic, practitioner, treatment, 11, "HELD")
    back = _book(clinic, practitioner, treatment, 13, "HELD")
    other = f.PractitionerFactory(clinic=clinic)
    done = appointments_apply_changes(changes=[
        _rebook(proposed, other, treatment),
        HeldReplace(options=(_option(held, other, treatment),)),
        StatusChange(appointment=back, target=AppointmentStatus.PROPOSED),
    ])
    assert [d.result for d in done] == [ChangeResult.APPLIED] * 3
    rebooked, replaced = done[0].booked, done[1].booked
    assert (rebooked.status, rebooked.practitioner_id, rebooked.starts_at) == ("PROPOSED", other.pk, proposed.starts_at)
    assert (replaced.status, replaced.practitioner_id, replaced.starts_at) == ("HELD", other.pk, held.starts_at)
    assert (_status(proposed), _status(held), _status(back)) == ("CANCELLED", "CANCELLED", "PROPOSED")
    assert set(CapacityAllocation.objects.filter(active=True).values_list("appointment_id", flat=True)) == {replaced.pk}


def test_a_change_refused_is_undone_alone(clinic, practitioner, treatment):
    """The PROPOSED one was changed since it was read (confirmed by staff): its rebooking is refused, nothing of it
    written (not even the booking), and the HELD one is still replaced."""
    proposed = _book(clinic, practitioner, treatment, 9, "PROPOSED")
    held = _book(clinic, practitioner, treatment, 11, "HELD")
    appointment_set_status(clinic=clinic, appointment_ref=proposed.ref, target="CONFIRMED")
    other = f.PractitionerFactory(clinic=clinic)
    done = appointments_apply_changes(changes=[
        _rebook(proposed, other, treatment), HeldReplace(options=(_option(held, other, treatment),))])
    assert [d.result for d in done] == [ChangeResult.REFUSED, ChangeResult.APPLIED]
    assert (_status(proposed), _status(held)) == ("CONFIRMED", "CANCELLED")
    assert not Appointment.objects.filter(practitioner=other, status="PROPOSED").exists()


def test_a_held_replacement_tries_its_options_in_turn(clinic, practitioner, treatment):
    held = _book(clinic, practitioner, treatment, 11, "HELD")
    taken, free = f.PractitionerFactory(clinic=clinic), f.PractitionerFactory(clinic=clinic)
    _book(clinic, taken, treatment, 11, "CONFIRMED")
    [done] = appointments_apply_changes(changes=[
        HeldReplace(options=(_option(held, taken, treatment), _option(held, free, treatment)))])
    assert (done.result, done.booked.practitioner_id) == (ChangeResult.APPLIED, free.pk)


def test_every_slot_taken_leaves_the_hold_or_releases_it(clinic, practitioner, treatment):
    kept = _book(clinic, practitioner, treatment, 11, "HELD")
    released = _book(clinic, practitioner, treatment, 13, "HELD")
    taken = f.PractitionerFactory(clinic=clinic)
    _book(clinic, taken, treatment, 11, "CONFIRMED")
    _book(clinic, taken, treatment, 13, "CONFIRMED")
    done = appointments_apply_changes(changes=[
        HeldReplace(options=(_option(kept, taken, treatment),)),
        HeldReplace(options=(_option(released, taken, treatment),), release_if_taken=True),
    ])
    assert [d.result for d in done] == [ChangeResult.SLOTS_TAKEN, ChangeResult.RELEASED]
    assert (_status(kept), _status(released)) == ("HELD", "PROPOSED")
    assert not CapacityAllocation.objects.filter(appointment_id=released.pk, active=True).exists()


def test_a_trial_says_what_would_be_booked_and_writes_nothing(clinic, practitioner, treatment):
    held = _book(clinic, practitioner, treatment, 11, "HELD")
    other = f.PractitionerFactory(clinic=clinic)
    before = list(Appointment.objects.order_by("pk").values("pk", "status", "version"))
    [done] = appointments_apply_changes(changes=[HeldReplace(options=(_option(held, other, treatment),), trial=True)])
    assert (done.result, done.booked) == (ChangeResult.WOULD_APPLY, None)
    assert list(Appointment.objects.order_by("pk").values("pk", "status", "version")) == before
    assert CapacityAllocation.objects.filter(active=True).count() == 1
