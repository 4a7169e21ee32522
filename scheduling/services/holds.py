"""Capacity holds: a slot reserved before an appointment exists, and the booking command."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.db import connection, transaction

from common.cas import cas_update, check_transition, sql_states, transition_sources
from common.errors import Conflict, NotFound
from common.fastpath import insert_sql, prepared_cursor, saved

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
        params += [clinic.pk, practitioner_id, resource_id, patient_id, allocations.period(starts_at, ends_at),
                   AllocationKind.HOLD, hold.created_at]
        # Fixed text, prepared once per connection (a waitlist offer's hold: dispatch's hot path, issue 15).
        with prepared_cursor(connection) as cursor:
            cursor.execute(_HOLD_PLACE_SQL.format(hold=sql), params)
            return saved(hold, cursor.fetchone()[0])

    return allocations.occupy(write)


_HOLD_PLACE_SQL = """
WITH hold AS ({hold} RETURNING id), allocation AS (
    INSERT INTO scheduling_capacityallocation
        (clinic_id, practitioner_id, resource_id, patient_id, period, active, kind, hold_id, appointment_id,
         created_at)
    SELECT %s, %s, %s, %s, %s, true, %s, hold.id, NULL, %s FROM hold
)
SELECT id FROM hold
"""


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


def hold_accept_sql(*, precondition: str) -> str:
    """``hold_accept`` as one ``UPDATE … RETURNING id`` for a caller's composite statement (the waitlist's
    claim writes offer, hold and entry in one round trip): the hold ACTIVE → ACCEPTED at the version it was
    locked at, only while ``precondition`` (the caller's SQL, e.g. "its offer's step changed a row") holds and
    the hold still has its active allocation. Its parameters come from ``hold_accept_params``; after the
    statement changed the row, ``hold_accepted`` brings the locked instance up to date.

    Fixed text for fixed ``precondition`` (a prepared statement): the states are the table's, as literals."""
    sources = sql_states(transition_sources(CapacityHold, HoldStatus.ACCEPTED, HoldStatus.ACTIVE))
    return (
        f"UPDATE scheduling_capacityhold SET status = {sql_states(HoldStatus.ACCEPTED)}, version = version + 1,"
        " expires_at = %(hold_expires)s\n"
        f"    WHERE id = %(hold)s AND status IN ({sources}) AND version = %(hold_version)s AND {precondition}\n"
        "      AND EXISTS (SELECT 1 FROM scheduling_capacityallocation a WHERE a.hold_id = %(hold)s AND a.active)\n"
        "    RETURNING id"
    )


def hold_accept_params(hold: CapacityHold, *, expires_at: datetime) -> dict[str, Any]:
    """The named parameters of ``hold_accept_sql`` for the locked ``hold``."""
    return {"hold": hold.pk, "hold_version": hold.version, "hold_expires": expires_at}


def hold_accepted(hold: CapacityHold, *, expires_at: datetime) -> None:
    """The locked instance after ``hold_accept_sql`` changed its row (nothing is written here)."""
    hold.status, hold.version, hold.expires_at = HoldStatus.ACCEPTED, hold.version + 1, expires_at


def hold_extend_sql(*, precondition: str) -> str:
    """Move an ACTIVE hold's expiry to ``%(hold_expires)s`` (the waitlist counts an offer's window from its
    notice's delivery), as one ``UPDATE … RETURNING id`` for a caller's composite statement, only while
    ``precondition`` (the caller's SQL) holds. The caller holds the hold's owner locked (its offer); parameters
    from ``hold_extend_params``. Fixed text for fixed ``precondition``: the states are the table's, as literals."""
    return (
        "UPDATE scheduling_capacityhold SET version = version + 1, updated_at = %(hold_now)s,"
        " expires_at = %(hold_expires)s\n"
        f"    WHERE id = %(hold)s AND status IN ({sql_states(HoldStatus.ACTIVE)}) AND {precondition}\n"
        "    RETURNING id"
    )


def hold_extend_params(hold_id: int, *, expires_at: datetime, now: datetime) -> dict[str, Any]:
    """The named parameters of ``hold_extend_sql``."""
    return {"hold": hold_id, "hold_expires": expires_at, "hold_now": now}


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
