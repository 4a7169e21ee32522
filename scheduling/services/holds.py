"""Capacity holds: a slot reserved before an appointment exists, and the booking command."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.db import transaction

from common.cas import cas_update, check_transition
from common.errors import Conflict, NotFound
from common.fastpath import insert_sql, saved

from .. import queries
from ..models import (
    HOLD_TRANSITIONS,
    AllocationKind,
    Appointment,
    AppointmentStatus,
    CapacityAllocation,
    CapacityHold,
    Clinic,
    HoldStatus,
)
from . import allocations


def hold_place(
    *,
    clinic: Clinic,
    practitioner_id: int,
    treatment_id: int,
    resource_id: int | None,
    patient_id: int,
    starts_at: datetime,
    ends_at: datetime,
    expires_at: datetime,
    purpose: str = "WAITLIST_OFFER",
) -> CapacityHold:
    """Reserve the slot for one patient until ``expires_at``; SLOT_OCCUPIED if the practitioner or resource
    is taken, PATIENT_OVERLAP if the patient holds or has booked an overlapping time.

    Both rows in one savepoint (``occupy``'s): a refused allocation takes its hold with it, and the caller's
    transaction stays usable."""

    def write() -> CapacityHold:
        hold = CapacityHold(
            clinic=clinic,
            practitioner_id=practitioner_id,
            treatment_id=treatment_id,
            resource_id=resource_id,
            patient_id=patient_id,
            starts_at=starts_at,
            ends_at=ends_at,
            expires_at=expires_at,
            purpose=purpose,
        )
        sql, params = insert_sql(hold)
        # The hold and its allocation in one statement (the exclusion constraints judge the allocation as ever).
        hold_id = queries.hold_place_with_allocation(
            sql, params, clinic_id=clinic.pk, practitioner_id=practitioner_id, resource_id=resource_id,
            patient_id=patient_id, period=allocations.period(starts_at, ends_at), kind=AllocationKind.HOLD,
            created_at=hold.created_at)
        return saved(hold, hold_id)

    return allocations.occupy(write)


def lock_hold(hold_id: int) -> CapacityHold:
    """The hold row, locked (FOR NO KEY UPDATE) for a command that ends it; NotFound when gone."""
    hold = CapacityHold.objects.select_for_update(no_key=True).filter(pk=hold_id).first()
    if hold is None:
        raise NotFound()
    return hold


def hold_accept(*, hold: CapacityHold, expires_at: datetime | None = None) -> CapacityHold:
    """ACTIVE → ACCEPTED. The caller holds the lock (it is mid-claim)."""
    check_transition(HOLD_TRANSITIONS, hold.status, HoldStatus.ACCEPTED, code="HOLD_NOT_ACCEPTABLE")
    changes: dict[str, Any] = {"status": HoldStatus.ACCEPTED}
    if expires_at is not None:
        changes["expires_at"] = expires_at
    with transaction.atomic():
        cas_update(hold, expected_status=HoldStatus.ACTIVE, **changes)
    return hold


def hold_accept_locked(hold: CapacityHold, *, expires_at: datetime) -> bool:
    """``hold_accept`` for a caller that holds the hold locked and has checked it (the waitlist's claim): one
    prepared statement, ACTIVE → ACCEPTED at the version it was locked at, only while the hold still has its
    active allocation. False (nothing written) when the row did not change; else the instance is brought up to
    date."""
    if not queries.hold_accept_locked(hold.pk, version=hold.version, expires_at=expires_at):
        return False
    hold.status, hold.version, hold.expires_at = HoldStatus.ACCEPTED, hold.version + 1, expires_at
    return True


def hold_extend(hold_id: int, *, expires_at: datetime, now: datetime) -> bool:
    """Move an ACTIVE hold's expiry to ``expires_at`` (the waitlist counts an offer's window from its notice's
    delivery); False (nothing written) when it is no longer ACTIVE. The caller holds the hold's owner locked."""
    return queries.hold_extend_active(hold_id, expires_at=expires_at, now=now)


def hold_release(*, hold: CapacityHold, reason: str) -> CapacityHold:
    """Free the slot. Releasing an already released hold is a no-op, so recovery can repeat it."""
    if hold.status == HoldStatus.RELEASED:
        return hold
    check_transition(HOLD_TRANSITIONS, hold.status, HoldStatus.RELEASED, code="HOLD_NOT_RELEASABLE")
    with transaction.atomic():
        cas_update(hold, expected_status=hold.status, status=HoldStatus.RELEASED, release_reason=reason[:60])
        allocations.release(hold=hold)
    return hold


def hold_book(*, clinic: Clinic, hold_ref: str) -> tuple[Appointment, bool]:
    """Consume an ACCEPTED hold into a CONFIRMED appointment; returns (appointment, created).

    The allocation is moved to the appointment in place, so the slot is never free in between.
    Retrying after success returns the same appointment; anything else is HOLD_NOT_BOOKABLE.
    """
    with transaction.atomic():
        hold = CapacityHold.objects.select_for_update(no_key=True).filter(clinic=clinic, ref=hold_ref).first()
        if hold is None:
            raise NotFound()
        if hold.status == HoldStatus.CONSUMED and hold.appointment_id:
            return cast(Appointment, hold.appointment), False
        if hold.status != HoldStatus.ACCEPTED:
            raise Conflict(f"The hold is {hold.status}.", code="HOLD_NOT_BOOKABLE")
        allocation = CapacityAllocation.objects.select_for_update(no_key=True).filter(hold=hold, active=True).first()
        if allocation is None:
            raise Conflict("The hold no longer reserves its slot.", code="HOLD_NOT_BOOKABLE")
        appointment = Appointment.objects.create(
            clinic=clinic,
            patient_id=hold.patient_id,
            practitioner_id=hold.practitioner_id,
            treatment_id=hold.treatment_id,
            resource_id=hold.resource_id,
            starts_at=hold.starts_at,
            ends_at=hold.ends_at,
            status=AppointmentStatus.CONFIRMED,
        )
        CapacityAllocation.objects.filter(pk=allocation.pk).update(
            kind=AllocationKind.APPOINTMENT, appointment=appointment
        )
        cas_update(
            hold, expected_status=HoldStatus.ACCEPTED, status=HoldStatus.CONSUMED, appointment=appointment
        )
        return appointment, True
