"""Recovery commands (ARCHITECTURE.md flow 9: a command with a reason and a correlation id, never
manual SQL): close or reopen a vacancy and retry a stuck booking. Staff withdrawal of an offer is
``offer_withdraw``. Each writes the offer's event rows (actor, reason code, correlation id) where an
offer changes, and one ``AuditEntry`` (actor, free-text reason, correlation id, result) always.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from common.cas import cas_update
from common.errors import Conflict, DomainError, NotFound
from common.services import audit_record, new_correlation_id
from scheduling.models import Appointment, Clinic, HoldStatus

from ..locks import lock_offer_chain, lock_vacancy
from ..models import ACTIVE_OFFER_STATUSES, Offer, OfferStatus, Vacancy, VacancyStatus
from ._shared import actor_label, event_append, queue_dispatch
from .booking import offer_book
from .offers import _close_offer


def _vacancy_id(clinic: Clinic, vacancy_ref) -> int:
    if not isinstance(vacancy_ref, str) or not vacancy_ref:
        raise NotFound()
    found = Vacancy.objects.filter(clinic=clinic, ref=vacancy_ref).values_list("pk", flat=True).first()
    if found is None:
        raise NotFound()
    return found


def vacancy_close(
    *,
    clinic: Clinic,
    vacancy_ref: str,
    actor,
    reason: str,
    now: datetime | None = None,
    correlation_id: str = "",
) -> tuple[Vacancy, Offer | None]:
    """OPEN/REVIEW → CLOSED (``STAFF_CLOSED``); an active, unbooked offer is withdrawn with it
    (reason ``VACANCY_CLOSED``, hold released, entry back to WAITING). Closing a CLOSED vacancy is a
    no-op; a FILLED one (or one whose offer is booked) is 409 ``VACANCY_NOT_CLOSABLE``."""
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    vacancy_id = _vacancy_id(clinic, vacancy_ref)
    with transaction.atomic():
        vacancy = lock_vacancy(vacancy_id)
        if vacancy.status == VacancyStatus.CLOSED:
            return vacancy, None
        if vacancy.status == VacancyStatus.FILLED:
            raise Conflict("The vacancy is filled.", code="VACANCY_NOT_CLOSABLE")
        active = Offer.objects.filter(vacancy=vacancy, status__in=ACTIVE_OFFER_STATUSES).first()
        withdrawn = None
        if active is not None:
            # Same transaction, same order: the vacancy row is already ours, so this re-lock is free.
            locks = lock_offer_chain(clinic=clinic, offer_id=active.pk)
            if locks.hold.status == HoldStatus.CONSUMED:
                raise Conflict("The vacancy's offer is booked.", code="VACANCY_NOT_CLOSABLE")
            # Close the vacancy first so the offer's close does not queue a cascade.
            cas_update(locks.vacancy, expected_status=locks.vacancy.status, status=VacancyStatus.CLOSED,
                       close_reason="STAFF_CLOSED")
            withdrawn = _close_offer(
                locks,
                to_status=OfferStatus.WITHDRAWN,
                reason_code="VACANCY_CLOSED",
                actor=actor_label(actor, "recover"),
                correlation_id=correlation_id,
                now=now,
            )
            vacancy = locks.vacancy
        else:
            cas_update(vacancy, expected_status=vacancy.status, status=VacancyStatus.CLOSED,
                       close_reason="STAFF_CLOSED")
        audit_record(
            actor=actor,
            action="waitlist.vacancy_close",
            clinic=clinic,
            target_ref=vacancy.ref,
            reason=reason,
            correlation_id=correlation_id,
            result={"status": vacancy.status, "version": vacancy.version,
                    "withdrawn_offer": withdrawn.ref if withdrawn else None},
            system_label="recover",
        )
        return vacancy, withdrawn


def vacancy_reopen(
    *,
    clinic: Clinic,
    vacancy_ref: str,
    actor,
    reason: str,
    now: datetime | None = None,
    correlation_id: str = "",
) -> Vacancy:
    """CLOSED or REVIEW → OPEN and dispatch again after commit. Reopening an OPEN vacancy is a no-op
    (a dispatch is still queued); FILLED is 409 ``VACANCY_NOT_REOPENABLE``; a started one is 409
    ``VACANCY_STARTED``. Capacity is never assumed free: dispatch places a new hold, and the
    exclusion constraint closes the vacancy again (``SLOT_TAKEN``) if the time was booked meanwhile."""
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    vacancy_id = _vacancy_id(clinic, vacancy_ref)
    with transaction.atomic():
        vacancy = lock_vacancy(vacancy_id)
        if vacancy.status == VacancyStatus.FILLED:
            raise Conflict("The vacancy is filled.", code="VACANCY_NOT_REOPENABLE")
        if vacancy.starts_at <= now:
            raise Conflict("The vacancy's time has started.", code="VACANCY_STARTED")
        if vacancy.status != VacancyStatus.OPEN:
            cas_update(vacancy, expected_status=vacancy.status, status=VacancyStatus.OPEN, close_reason="",
                       review_entry=None)
        audit_record(
            actor=actor,
            action="waitlist.vacancy_reopen",
            clinic=clinic,
            target_ref=vacancy.ref,
            reason=reason,
            correlation_id=correlation_id,
            result={"status": vacancy.status, "version": vacancy.version},
            system_label="recover",
        )
        queue_dispatch(vacancy.pk)
        return vacancy


def hold_retry_booking(
    *,
    clinic: Clinic,
    hold_ref: str,
    actor,
    reason: str,
    now: datetime | None = None,
    correlation_id: str = "",
) -> Appointment:
    """Run the booking command again for an ACCEPTED hold (idempotent: a booked hold answers its
    appointment). A refusal is recorded (event ``BOOKING_RETRY_FAILED`` with the code) and re-raised."""
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    offer = (
        Offer.objects.filter(clinic=clinic, hold__ref=hold_ref if isinstance(hold_ref, str) else "")
        .only("pk", "ref", "status", "clinic_id", "correlation_id")
        .first()
    )
    if offer is None:
        raise NotFound()
    try:
        appointment, created = offer_book(
            clinic=clinic, hold_ref=hold_ref, actor=actor, now=now, correlation_id=correlation_id
        )
    except DomainError as exc:
        with transaction.atomic():
            event_append(offer=offer, from_status=offer.status, to_status=offer.status,
                         reason_code="BOOKING_RETRY_FAILED", actor=actor_label(actor, "recover"),
                         correlation_id=correlation_id, now=now, detail={"hold": hold_ref, "code": exc.code})
            audit_record(actor=actor, action="waitlist.booking_retry", clinic=clinic, target_ref=hold_ref,
                         reason=reason, correlation_id=correlation_id, result={"code": exc.code},
                         system_label="recover")
        raise
    audit_record(actor=actor, action="waitlist.booking_retry", clinic=clinic, target_ref=hold_ref, reason=reason,
                 correlation_id=correlation_id,
                 result={"appointment": appointment.ref, "created": created, "status": appointment.status},
                 system_label="recover")
    return appointment


def offer_close_without_hold(*, clinic: Clinic, offer_id: int, now: datetime, correlation_id: str) -> Offer | None:
    """Reconcile's repair of invariant 2: an OFFERED offer whose hold no longer reserves the slot is
    WITHDRAWN (``NO_ACTIVE_HOLD``) so the vacancy cascades. Anything else is left for staff."""
    with transaction.atomic():
        locks = lock_offer_chain(clinic=clinic, offer_id=offer_id)
        if locks.offer.status != OfferStatus.OFFERED:
            return None
        if locks.hold.status == HoldStatus.ACTIVE and locks.hold.allocations.filter(active=True).exists():
            return None  # repaired meanwhile
        return _close_offer(locks, to_status=OfferStatus.WITHDRAWN, reason_code="NO_ACTIVE_HOLD",
                            actor="system:reconcile", correlation_id=correlation_id, now=now)
