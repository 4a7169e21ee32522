"""Allocation writes. The exclusion constraints are the judge: a practitioner/resource overlap is
SLOT_OCCUPIED, an overlap with the same patient's other holds or appointments PATIENT_OVERLAP."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from django.db import IntegrityError, OperationalError, transaction
from psycopg.errors import DeadlockDetected, ExclusionViolation
from psycopg.types.range import Range

from common.errors import PatientOverlap, SlotOccupied

from ..models import PATIENT_OVERLAP_CONSTRAINT, AllocationKind, CapacityAllocation

T = TypeVar("T")

#: Two uncommitted overlapping inserts wait on each other and PostgreSQL aborts one of them
#: (deadlock). The victim retries in a fresh savepoint and then sees the winner's row.
DEADLOCK_RETRIES = 3


def period(starts_at: datetime, ends_at: datetime) -> Range:
    """Half-open ``[start, end)``: back-to-back slots touch without overlapping."""
    return Range(starts_at, ends_at, "[)")


def occupy(write: Callable[[], T]) -> T:
    """Run ``write`` in a savepoint; an overlap (or losing a contended insert) is SLOT_OCCUPIED."""
    for attempt in range(DEADLOCK_RETRIES):
        try:
            with transaction.atomic():
                return write()
        except IntegrityError as exc:
            if isinstance(exc.__cause__, ExclusionViolation):
                if exc.__cause__.diag.constraint_name == PATIENT_OVERLAP_CONSTRAINT:
                    raise PatientOverlap("The patient has a hold or appointment at an overlapping time.") from exc
                raise SlotOccupied("That time is already taken for this practitioner or resource.") from exc
            raise
        except OperationalError as exc:
            if not isinstance(exc.__cause__, DeadlockDetected):
                raise
            if attempt == DEADLOCK_RETRIES - 1:
                raise SlotOccupied("That time is being taken by someone else.") from exc
    raise AssertionError("unreachable")


def allocate(**fields) -> CapacityAllocation:
    """``allocation_insert`` in its own savepoint: an overlap is a typed error (``occupy``)."""
    return occupy(lambda: allocation_insert(**fields))


def allocation_insert(*, starts_at, ends_at, **fields) -> CapacityAllocation:
    """The allocation row alone (clinic, practitioner, resource, patient, kind, hold or appointment): only
    inside ``occupy`` (whose savepoint turns an overlap into a typed error)."""
    return CapacityAllocation.objects.create(period=period(starts_at, ends_at), **fields)


def _appointment_allocation(appointment) -> CapacityAllocation:
    """The active allocation of a HELD or CONFIRMED appointment, unsaved."""
    return CapacityAllocation(
        clinic_id=appointment.clinic_id,
        practitioner_id=appointment.practitioner_id,
        resource_id=appointment.resource_id,
        patient_id=appointment.patient_id,
        period=period(appointment.starts_at, appointment.ends_at),
        kind=AllocationKind.APPOINTMENT,
        appointment=appointment,
    )


def allocate_for_appointment(appointment) -> CapacityAllocation:
    def write() -> CapacityAllocation:
        allocation = _appointment_allocation(appointment)
        allocation.save(force_insert=True)
        return allocation

    return occupy(write)


def allocate_for_appointments(appointments: list) -> list[CapacityAllocation]:
    """``allocate_for_appointment`` for many in one INSERT: one overlap and none is written."""
    return occupy(lambda: CapacityAllocation.objects.bulk_create([_appointment_allocation(a) for a in appointments]))


def reallocate_appointment(appointment) -> CapacityAllocation:
    """Swap an appointment's allocation for one at its current time, atomically."""

    def swap():
        release(appointment=appointment)
        allocation = _appointment_allocation(appointment)
        allocation.save(force_insert=True)
        return allocation

    return occupy(swap)


def release(**owner) -> int:
    """Free the active allocation of a hold or an appointment (``hold=`` or ``appointment=``)."""
    return CapacityAllocation.objects.filter(active=True, **owner).update(active=False)
