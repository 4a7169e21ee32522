"""Appointment commands. Capacity (HELD, CONFIRMED) is reserved by an allocation row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models, transaction
from django.utils import timezone

from common.cas import cas_conflict, cas_update, check_transition, transition_sources
from common.errors import Conflict, NotFound, SlotOccupied, ValidationFailed
from common.fastpath import PreparedQuery
from common.transactions import own_transaction

from .. import queries
from ..models import (
    APPOINTMENT_TRANSITIONS,
    CAPACITY_STATUSES,
    Appointment,
    AppointmentStatus,
    Clinic,
    Patient,
    Practitioner,
    Resource,
    Treatment,
)
from . import allocations


def _same_clinic(clinic_id: int, **objs) -> None:
    wrong = [name for name, obj in objs.items() if obj is not None and obj.clinic_id != clinic_id]
    if wrong:
        raise ValidationFailed(fields={name: ["Not found in this clinic."] for name in wrong})


def appointment_book(
    *,
    clinic: Clinic,
    patient: Patient,
    practitioner: Practitioner,
    treatment: Treatment,
    starts_at: datetime,
    status: str,
    resource: Resource | None = None,
) -> Appointment:
    """Create an appointment; HELD and CONFIRMED reserve capacity or fail with SLOT_OCCUPIED."""
    _same_clinic(clinic.pk, patient=patient, practitioner=practitioner, treatment=treatment, resource=resource)
    if status not in (AppointmentStatus.PROPOSED, AppointmentStatus.HELD, AppointmentStatus.CONFIRMED):
        raise ValidationFailed(fields={"status": ["Must be PROPOSED, HELD or CONFIRMED."]})
    with transaction.atomic():
        appointment = Appointment.objects.create(
            clinic=clinic,
            patient=patient,
            practitioner=practitioner,
            treatment=treatment,
            resource=resource,
            starts_at=starts_at,
            ends_at=starts_at + timedelta(minutes=treatment.duration_minutes),
            status=status,
        )
        if status in CAPACITY_STATUSES:
            allocations.allocate_for_appointment(appointment)
        return appointment


#: The two locks of a cancellation, by (clinic id, appointment ref): compiled once per process and planned once per
#: connection (the ORM's own statements; building them was a tenth of the web's CPU in the storm).
_LOCK_ALLOCATION: PreparedQuery[allocations.CapacityAllocation] = PreparedQuery(
    lambda clinic_id, ref: allocations.CapacityAllocation.objects.select_for_update(of=("self",), no_key=True)
    .filter(active=True, appointment__ref=ref, appointment__clinic_id=clinic_id).order_by("pk")[:1], int, str)
_LOCK_APPOINTMENT: PreparedQuery[Appointment] = PreparedQuery(
    lambda clinic_id, ref: Appointment.objects.select_for_update(no_key=True).filter(clinic_id=clinic_id, ref=ref)
    .order_by("pk")[:1], int, str)


def _lock(clinic: Clinic, appointment_ref: str) -> Appointment:
    """Lock order: allocation before appointment (ARCHITECTURE.md)."""
    ref = appointment_ref if isinstance(appointment_ref, str) else ""
    _LOCK_ALLOCATION.first(clinic.pk, ref)
    appointment = _LOCK_APPOINTMENT.first(clinic.pk, ref)
    if appointment is None:
        raise NotFound()
    return appointment


def appointment_cancel(
    *, clinic: Clinic, appointment_ref: str, reason: str, expected_version: int | None = None,
    reason_code: str = "", cancelled_by: str = "",
) -> Appointment:
    """Cancel and free the slot, recording why (``reason_code``, a ``CancelReason``; ``reason``, free words) and
    who (``cancelled_by``, ``cancel_actor_ref``). Returns the appointment as it was cancelled (with
    ``previous_status``). Every refusal (NotFound, APPOINTMENT_NOT_CANCELLABLE, a version Conflict) comes before
    its first write, so inside a caller's transaction it takes no savepoint (``own_transaction``)."""
    with own_transaction():
        appointment = _lock(clinic, appointment_ref)
        previous = appointment.status
        check_transition(
            APPOINTMENT_TRANSITIONS, previous, AppointmentStatus.CANCELLED, code="APPOINTMENT_NOT_CANCELLABLE"
        )
        version = appointment.version if expected_version is None else expected_version
        sources = transition_sources(Appointment, AppointmentStatus.CANCELLED, [previous])
        if not 0 <= version <= MAX_VERSION:  # no row has it, and the statement's integer array could not hold it
            raise cas_conflict(Appointment, appointment.pk, version=version, sources=sources)
        now, reason, cancelled_by = timezone.now(), reason[:200], cancelled_by[:120]
        cancelled = _cancel_rows(ids=[appointment.pk], versions=[version], reasons=[reason],
                                 codes=[reason_code], actors=[cancelled_by], sources=sources, now=now)
        if not cancelled:
            raise cas_conflict(Appointment, appointment.pk, version=version, sources=sources)
        appointment.status, appointment.version, appointment.updated_at = AppointmentStatus.CANCELLED, version + 1, now
        appointment.cancel_reason, appointment.cancel_reason_code = reason, reason_code
        appointment.cancelled_by = cancelled_by
        appointment.previous_status = previous
        return appointment


@dataclass(frozen=True)
class Replacement:
    """An appointment (as read: its version is the expected one) and what replaces it at the same start, for the
    same patient: ``practitioner``, ``treatment`` and ``resource``; the old one's cancellation reason and actor."""

    appointment: Appointment
    practitioner: Practitioner
    treatment: Treatment
    resource: Resource | None
    reason: str
    reason_code: str
    cancelled_by: str


@dataclass(frozen=True)
class HeldReplacement(Replacement):
    """A HELD appointment replaced by a HELD one (``appointments_replace_held``)."""


#: The largest ``version`` a row can have (a PostgreSQL integer).
MAX_VERSION = 2**31 - 1

def _cancel_rows(*, ids: list[int], versions: list[int], reasons: list[str], codes: list[str],
                 actors: list[str], sources: list[str], now, prepared: bool = True) -> list[int]:
    """Cancel appointments at their versions from ``sources`` and free their slots, in one statement (one
    appointment: ``appointment_cancel``; a round's HELD ones: ``appointments_replace_held``); the ids it cancelled."""
    return queries.appointments_cancel_rows(
        cancelled=AppointmentStatus.CANCELLED, ids=ids, versions=versions, reasons=reasons, codes=codes,
        actors=actors, sources=sources, now=now, prepared=prepared)


def appointments_replace_held(*, replacements: list[HeldReplacement]) -> list[Appointment]:
    """Cancel every HELD appointment of ``replacements`` and book each one's replacement, HELD at the same
    start, all or nothing: what ``appointment_cancel`` then ``appointment_book`` do for one, in five
    statements for all (allocations locked first, as ``_lock`` does; the cancels and their releases; the new
    rows; their allocations under the exclusion constraints). Returns the new appointments in order.

    A row changed since it was read is the Conflict ``cas_update`` raises; an overlap is SLOT_OCCUPIED or
    PATIENT_OVERLAP (``allocations.occupy``). Then nothing is written.
    """
    if not replacements:
        return []
    check_transition(
        APPOINTMENT_TRANSITIONS, AppointmentStatus.HELD, AppointmentStatus.CANCELLED, code="APPOINTMENT_NOT_CANCELLABLE"
    )
    for r in replacements:
        _same_clinic(r.appointment.clinic_id, practitioner=r.practitioner, treatment=r.treatment, resource=r.resource)
    ids = [r.appointment.pk for r in replacements]
    sources = transition_sources(Appointment, AppointmentStatus.CANCELLED, [AppointmentStatus.HELD])
    now = timezone.now()
    with transaction.atomic():
        queries.allocations_lock_for_appointments(ids)
        cancelled = _cancel_rows(
            ids=ids, versions=[r.appointment.version for r in replacements],
            reasons=[r.reason[:200] for r in replacements], codes=[r.reason_code for r in replacements],
            actors=[r.cancelled_by[:120] for r in replacements], sources=sources, now=now, prepared=False)
        if len(cancelled) != len(ids):
            missed = next(r.appointment for r in replacements if r.appointment.pk not in set(cancelled))
            raise cas_conflict(Appointment, missed.pk, version=missed.version, sources=sources)
        booked = Appointment.objects.bulk_create([
            Appointment(
                clinic_id=r.appointment.clinic_id, patient_id=r.appointment.patient_id, practitioner=r.practitioner,
                treatment=r.treatment, resource=r.resource, starts_at=r.appointment.starts_at,
                ends_at=r.appointment.starts_at + timedelta(minutes=r.treatment.duration_minutes),
                status=AppointmentStatus.HELD,
            )
            for r in replacements
        ])
        allocations.allocate_for_appointments(booked)
    return booked


def appointment_set_status(
    *, clinic: Clinic, appointment_ref: str, target: str, expected_version: int | None = None
) -> Appointment:
    """Move between PROPOSED, HELD and CONFIRMED, reserving or freeing capacity to match."""
    with transaction.atomic():
        appointment = _lock(clinic, appointment_ref)
        previous = appointment.status
        if target == AppointmentStatus.CANCELLED:
            raise ValidationFailed("Use the cancel command.")
        check_transition(APPOINTMENT_TRANSITIONS, previous, target, code="APPOINTMENT_TRANSITION_INVALID")
        cas_update(appointment, expected_status=previous, expected_version=expected_version, status=target)
        had, needs = previous in CAPACITY_STATUSES, target in CAPACITY_STATUSES
        if needs and not had:
            allocations.allocate_for_appointment(appointment)
        elif had and not needs:
            allocations.release(appointment=appointment)
        return appointment


def appointment_move(
    *,
    clinic: Clinic,
    appointment_ref: str,
    starts_at: datetime,
    practitioner: Practitioner | None = None,
    resource: Resource | None = None,
    keep_resource: bool = True,
    expected_version: int | None = None,
) -> Appointment:
    """Replace the time (and optionally practitioner/resource) of a PROPOSED or HELD appointment.

    A HELD appointment's allocation is swapped in one savepoint: either the new slot is held and
    the old one freed, or SLOT_OCCUPIED and nothing changed. CONFIRMED is refused, always.
    """
    with transaction.atomic():
        appointment = _lock(clinic, appointment_ref)
        if appointment.status not in (AppointmentStatus.PROPOSED, AppointmentStatus.HELD):
            raise Conflict(
                f"A {appointment.status} appointment cannot be moved.", code="APPOINTMENT_NOT_MOVABLE"
            )
        practitioner = practitioner or appointment.practitioner
        new_resource = appointment.resource if keep_resource and resource is None else resource
        _same_clinic(clinic.pk, practitioner=practitioner, resource=new_resource)
        ends_at = starts_at + (appointment.ends_at - appointment.starts_at)
        cas_update(
            appointment,
            expected_status=appointment.status,
            expected_version=expected_version,
            starts_at=starts_at,
            ends_at=ends_at,
            practitioner=practitioner,
            resource=new_resource,
        )
        if appointment.status == AppointmentStatus.HELD:
            allocations.reallocate_appointment(appointment)
        return appointment


# --- several appointments changed in one command ---------------------------------------------------------------


@dataclass(frozen=True)
class Rebook(Replacement):
    """A PROPOSED appointment cancelled and booked anew, PROPOSED: ``appointment_cancel`` then
    ``appointment_book``, both or neither."""


@dataclass(frozen=True)
class HeldReplace:
    """A HELD appointment replaced at the same start by the first of ``options`` (``HeldReplacement``s of that one
    appointment, in the order tried) whose slot is free, as ``appointments_replace_held`` does for one. With every
    slot taken: back to PROPOSED, its capacity released, when ``release_if_taken``; else left as it is. A ``trial``
    tries each option and undoes it: the result says whether one would be booked (a dry run)."""

    options: tuple[HeldReplacement, ...]
    release_if_taken: bool = False
    trial: bool = False


@dataclass(frozen=True)
class StatusChange:
    """An appointment (as read) moved to ``target``: ``appointment_set_status`` at its version."""

    appointment: Appointment
    target: str


AppointmentChange = Rebook | HeldReplace | StatusChange


class ChangeResult(models.TextChoices):
    """What became of one change of ``appointments_apply_changes``."""

    APPLIED = "APPLIED"  # made (a Rebook's or a HeldReplace's new appointment is ``booked``)
    WOULD_APPLY = "WOULD_APPLY"  # a trial: an option's slot is free, the booking undone
    RELEASED = "RELEASED"  # a HeldReplace with every slot taken: back to PROPOSED
    SLOTS_TAKEN = "SLOTS_TAKEN"  # a HeldReplace with every slot taken, left as it was
    REFUSED = "REFUSED"  # the appointment changed since it was read (a Conflict) or is gone: nothing written


@dataclass(frozen=True)
class ChangeDone:
    change: AppointmentChange
    result: ChangeResult
    booked: Appointment | None = None


class _Undo(Exception):
    """Raised inside a savepoint to undo a trial."""


def appointments_apply_changes(*, changes: list[AppointmentChange]) -> list[ChangeDone]:
    """Carry out ``changes`` in order, each in its own savepoint of the caller's transaction (none is opened around
    them): a change refused (the Conflict or NotFound its single command would raise: changed by someone else
    since it was read) is undone alone and reported ``REFUSED``; the others still happen. One result per change,
    in order. A ``HeldReplace`` whose option's slot is taken (SLOT_OCCUPIED, PATIENT_OVERLAP) tries the next.

    The statements are those of the single-appointment commands it stands for (``appointment_cancel`` and
    ``appointment_book``, ``appointments_replace_held``, ``appointment_set_status``); a validation error (a row of
    another clinic) is raised, as they raise it."""
    done = []
    for change in changes:
        try:
            done.append(_apply_change(change))
        except (Conflict, NotFound):
            done.append(ChangeDone(change, ChangeResult.REFUSED))
    return done


def _apply_change(change: AppointmentChange) -> ChangeDone:
    if isinstance(change, Rebook):
        appt = change.appointment
        with transaction.atomic():
            appointment_cancel(
                clinic=appt.clinic, appointment_ref=appt.ref, reason=change.reason, expected_version=appt.version,
                reason_code=change.reason_code, cancelled_by=change.cancelled_by,
            )
            booked = appointment_book(
                clinic=appt.clinic, patient=appt.patient, practitioner=change.practitioner, treatment=change.treatment,
                resource=change.resource, starts_at=appt.starts_at, status=AppointmentStatus.PROPOSED,
            )
        return ChangeDone(change, ChangeResult.APPLIED, booked)
    if isinstance(change, HeldReplace):
        for option in change.options:
            try:
                with transaction.atomic():
                    [booked] = appointments_replace_held(replacements=[option])
                    if change.trial:
                        raise _Undo
                return ChangeDone(change, ChangeResult.APPLIED, booked)
            except _Undo:
                return ChangeDone(change, ChangeResult.WOULD_APPLY)
            except SlotOccupied:
                continue
        if not change.release_if_taken or not change.options:
            return ChangeDone(change, ChangeResult.SLOTS_TAKEN)
        appt = change.options[0].appointment
        appointment_set_status(clinic=appt.clinic, appointment_ref=appt.ref, target=AppointmentStatus.PROPOSED,
                               expected_version=appt.version)
        return ChangeDone(change, ChangeResult.RELEASED)
    appointment_set_status(clinic=change.appointment.clinic, appointment_ref=change.appointment.ref,
                           target=change.target, expected_version=change.appointment.version)
    return ChangeDone(change, ChangeResult.APPLIED)
