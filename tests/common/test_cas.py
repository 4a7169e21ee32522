"""Compare-and-set on a stale in-memory copy: the write is refused and the row is untouched."""

from __future__ import annotations

import pytest

from common.cas import cas_update, check_transition
from common.errors import Conflict, VersionConflict
from scheduling.models import APPOINTMENT_TRANSITIONS, Appointment
from tests import factories as f


def test_a_stale_copy_cannot_overwrite_a_newer_row(db):
    fresh = f.AppointmentFactory(status="PROPOSED")
    stale = Appointment.objects.get(pk=fresh.pk)
    cas_update(fresh, expected_status="PROPOSED", status="HELD")
    with pytest.raises(VersionConflict):
        cas_update(stale, expected_status="PROPOSED", status="CANCELLED")
    row = Appointment.objects.get(pk=fresh.pk)
    assert (row.status, row.version) == ("HELD", 2)


def test_a_matching_version_in_the_wrong_state_is_a_state_conflict(db):
    appointment = f.AppointmentFactory(status="CONFIRMED")
    with pytest.raises(Conflict) as info:
        cas_update(appointment, expected_status="PROPOSED", status="HELD")
    assert info.value.code == "STATE_CONFLICT"
    assert Appointment.objects.get(pk=appointment.pk).version == 1


def test_a_successful_cas_bumps_the_version_in_place(db):
    appointment = f.AppointmentFactory(status="PROPOSED")
    cas_update(appointment, expected_status="PROPOSED", status="HELD")
    assert appointment.version == 2 and appointment.status == "HELD"


def test_transitions_not_listed_are_refused():
    with pytest.raises(Conflict) as info:
        check_transition(APPOINTMENT_TRANSITIONS, "CONFIRMED", "HELD", code="APPOINTMENT_TRANSITION_INVALID")
    assert info.value.code == "APPOINTMENT_TRANSITION_INVALID"


def test_every_cas_write_moves_updated_at_with_the_version(db):
    """``updated_at`` is ``auto_now``, which Django sets in ``save()`` only: the CAS (an UPDATE) sets it itself,
    in the row and on the instance, for one row and for the bulk form; a row without the column is unaffected."""
    from datetime import timedelta

    import time_machine

    from common.cas import cas_update_all

    start = Appointment.objects.get(pk=f.AppointmentFactory(status="PROPOSED").pk).updated_at
    with time_machine.travel(start + timedelta(minutes=3), tick=False):
        appointment = Appointment.objects.get(status="PROPOSED")
        cas_update(appointment, expected_status="PROPOSED", status="HELD")
        assert appointment.updated_at == start + timedelta(minutes=3)
        assert Appointment.objects.get(pk=appointment.pk).updated_at == start + timedelta(minutes=3)
    with time_machine.travel(start + timedelta(minutes=7), tick=False):
        assert cas_update_all(Appointment.objects.filter(pk=appointment.pk), status="CANCELLED") == 1
    assert Appointment.objects.get(pk=appointment.pk).updated_at == start + timedelta(minutes=7)
    explicit = start + timedelta(days=1)
    other = f.AppointmentFactory(status="PROPOSED")
    cas_update(other, expected_status="PROPOSED", status="HELD", updated_at=explicit)  # a caller's value wins
    assert Appointment.objects.get(pk=other.pk).updated_at == explicit


def test_a_move_and_what_it_settles_are_one_command(db):
    """``cas_update_settling``: the row moved inside its fence, then the bulk move it settles; outside the fence,
    False and nothing written (not the settle either); a move the table does not list raises before any SQL."""
    from django.db.models import Q

    from common.cas import cas_update_settling

    moved, other = f.AppointmentFactory(status="PROPOSED"), f.AppointmentFactory(status="PROPOSED")
    settle = Appointment.objects.filter(pk=other.pk)
    assert not cas_update_settling(Appointment, pk=moved.pk, fence=Q(version=7), settle=settle,
                                   settled={"cancel_reason": "settled"}, status="HELD")
    assert list(Appointment.objects.order_by("pk").values_list("status", "version", "cancel_reason")) == [
        ("PROPOSED", 1, ""), ("PROPOSED", 1, "")]
    assert cas_update_settling(Appointment, pk=moved.pk, fence=Q(version=1), settle=settle,
                               settled={"cancel_reason": "settled"}, expected_status="PROPOSED", status="HELD")
    assert list(Appointment.objects.order_by("pk").values_list("status", "version", "cancel_reason")) == [
        ("HELD", 2, ""), ("PROPOSED", 2, "settled")]
    with pytest.raises(Conflict) as info:
        cas_update_settling(Appointment, pk=moved.pk, fence=Q(), settle=settle, settled={}, status="PROPOSED",
                            expected_status="CANCELLED")
    assert info.value.code.endswith("_TRANSITION_INVALID")
