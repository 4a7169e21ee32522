"""Replacing one appointment by another in one transaction: the old allocation released and the new one taken
under the same exclusion constraints, so the patient is never without a time and the slot is never free
in between (or nothing changes at all)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from common.cas import cas_update
from common.errors import Conflict, NotFound

from ..models import (
    CAPACITY_STATUSES,
    LIVE_HOLD_STATUSES,
    AllocationKind,
    Appointment,
    AppointmentStatus,
    CancelReason,
    CapacityAllocation,
    CapacityHold,
    Clinic,
    HoldStatus,
    Practitioner,
    Resource,
    Treatment,
)
from . import allocations


def appointment_swap(
    *,
    clinic: Clinic,
    appointment_ref: str,
    expected_status: str,
    expected_version: int | None,
    practitioner: Practitioner,
    treatment: Treatment,
    resource: Resource | None,
    starts_at: datetime,
    status: str,
    reason: str,
    cancelled_by: str,
    hold: CapacityHold | None = None,
) -> tuple[Appointment, Appointment]:
    """Cancel ``appointment_ref`` and book its replacement (``status``) in one transaction; returns (old, new).

    With ``hold`` (a live hold of the same patient at exactly the new time), the hold's allocation becomes
    the new appointment's in place and the hold is CONSUMED; without it a new allocation is inserted after
    the old one is released, and the exclusion constraints judge it (SLOT_OCCUPIED, PATIENT_OVERLAP). Any
    refusal rolls the whole swap back. The old appointment must still be ``expected_status`` at
    ``expected_version`` (APPOINTMENT_CHANGED otherwise). The old one records why (``RESCHEDULED``, ``reason``)
    and who (``cancelled_by``, a ``cancel_actor_ref``). Lock order: hold/allocation before appointment.
    """
    with transaction.atomic():
        hold, allocation = _lock_hold(clinic, hold) if hold is not None else (None, None)
        old = _lock_old(clinic, appointment_ref, expected_status=expected_status, expected_version=expected_version)
        if hold is not None and (
            hold.patient_id != old.patient_id or hold.starts_at != starts_at
            or hold.practitioner_id != practitioner.pk or hold.resource_id != (resource.pk if resource else None)
        ):
            raise Conflict("The hold is not for this time.", code="HOLD_NOT_LIVE")
        cas_update(old, expected_status=expected_status, status=AppointmentStatus.CANCELLED, cancel_reason=reason[:200],
                   cancel_reason_code=CancelReason.RESCHEDULED, cancelled_by=cancelled_by[:120])
        allocations.release(appointment=old)
        old.previous_status = expected_status
        new = Appointment.objects.create(
            clinic=clinic,
            patient_id=old.patient_id,
            practitioner=practitioner,
            treatment=treatment,
            resource=resource,
            starts_at=starts_at,
            ends_at=starts_at + timedelta(minutes=treatment.duration_minutes),
            status=status,
        )
        _take_capacity(new, hold, allocation)
        return old, new


def _lock_hold(clinic: Clinic, hold: CapacityHold) -> tuple[CapacityHold, CapacityAllocation]:
    """The hold and its active allocation, locked (hold before allocation before appointment); both live."""
    locked = CapacityHold.objects.select_for_update(no_key=True).filter(pk=hold.pk, clinic=clinic).first()
    if locked is None:
        raise NotFound()
    allocation = CapacityAllocation.objects.select_for_update(no_key=True).filter(hold=locked, active=True).first()
    if locked.status not in LIVE_HOLD_STATUSES or allocation is None:
        raise Conflict("The held time is no longer reserved.", code="HOLD_NOT_LIVE")
    return locked, allocation


def _lock_old(clinic: Clinic, appointment_ref: str, *, expected_status: str, expected_version: int | None
              ) -> Appointment:
    """The appointment being replaced, locked after its allocation, still as the proposal saw it."""
    CapacityAllocation.objects.select_for_update(of=("self",), no_key=True).filter(
        active=True, appointment__ref=appointment_ref, appointment__clinic=clinic
    ).first()
    old = Appointment.objects.select_for_update(no_key=True).filter(clinic=clinic, ref=appointment_ref).first()
    if old is None:
        raise NotFound()
    if old.status != expected_status or (expected_version is not None and old.version != expected_version):
        raise Conflict("The appointment changed since the proposal was made.", code="APPOINTMENT_CHANGED")
    return old


def _take_capacity(new: Appointment, hold: CapacityHold | None, allocation: CapacityAllocation | None) -> None:
    """The new appointment's capacity: the hold's allocation in place (the hold CONSUMED), or, without a hold
    for it, the hold released and a fresh allocation the exclusion constraints judge."""
    if hold is not None and allocation is not None and new.status in CAPACITY_STATUSES:
        if allocation.period.upper != new.ends_at:
            raise Conflict("The hold is not for this time.", code="HOLD_NOT_LIVE")
        CapacityAllocation.objects.filter(pk=allocation.pk).update(kind=AllocationKind.APPOINTMENT, appointment=new)
        if hold.status == HoldStatus.ACTIVE:
            cas_update(hold, expected_status=HoldStatus.ACTIVE, status=HoldStatus.ACCEPTED)
        cas_update(hold, expected_status=HoldStatus.ACCEPTED, status=HoldStatus.CONSUMED, appointment=new)
        return
    if hold is not None:
        cas_update(hold, expected_status=hold.status, status=HoldStatus.RELEASED, release_reason="swap")
        allocations.release(hold=hold)
    if new.status in CAPACITY_STATUSES:
        allocations.allocate_for_appointment(new)
