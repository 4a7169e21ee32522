"""Waitlist entry commands."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from common.cas import cas_update
from common.errors import (
    Conflict,
    EntryDuplicate,
    PermissionDenied,
    ValidationFailed,
    VersionConflict,
    constraint_violated,
)
from common.services import actor_label, audit_record, new_correlation_id
from scheduling.models import Clinic, HoldStatus, Patient, Practitioner, Treatment
from scheduling.scoping import may_run, scoped_get
from waitlist.dispatch.locks import lock_entry, lock_offer_chain
from waitlist.dispatch.promotion import close_offer
from waitlist.effects import command_audit
from waitlist.joining.availability import ANY_TIME
from waitlist.models import ACTIVE_OFFER_STATUSES, LIVE_ENTRY_STATUSES, EntryStatus, Offer, OfferStatus, WaitlistEntry


def entry_create(
    *,
    clinic: Clinic,
    patient: Patient,
    treatment: Treatment,
    earliest: datetime,
    latest: datetime,
    practitioner: Practitioner | None = None,
    resource_kind: str = "",
    priority_rank: int = 0,
    availability: int = ANY_TIME,
    now: datetime | None = None,
    actor=None,
    idempotency_key: str = "",
) -> WaitlistEntry:
    """Put a patient on the waitlist (WAITING) for a slot inside [earliest, latest].

    A non-zero ``priority_rank`` is a staff priority edit: ADMIN only (checked by the API) and audited.
    A second live entry (WAITING, OFFERED or ACCEPTED) of the patient for the treatment whose window overlaps
    is refused, not merged (``EntryDuplicate``, 409 ``ENTRY_DUPLICATE``): the exclusion constraint
    ``wl_entry_one_live_per_window`` decides, so two racing requests cannot both get in.
    """
    wrong = [
        name
        for name, obj in (("patient", patient), ("treatment", treatment), ("practitioner", practitioner))
        if obj is not None and obj.clinic_id != clinic.pk
    ]
    if wrong:
        raise ValidationFailed(fields={name: ["Not found in this clinic."] for name in wrong})
    if latest <= earliest:
        raise ValidationFailed(fields={"latest": ["Must be after earliest."]})
    if not 0 < availability <= ANY_TIME:
        raise ValidationFailed(fields={"availability": ["Name at least one day and part of the day."]})
    with transaction.atomic():
        try:
            with transaction.atomic():
                entry = WaitlistEntry.objects.create(
                    clinic=clinic, tenant_group_id=clinic.tenant_group_id, patient=patient, treatment=treatment,
                    practitioner=practitioner, resource_kind=resource_kind, earliest=earliest, latest=latest,
                    priority_rank=priority_rank, availability=availability, waiting_since=now or timezone.now(),
                )
        except IntegrityError as exc:
            if constraint_violated(exc) != "wl_entry_one_live_per_window":
                raise
            raise _duplicate(clinic, patient, treatment, earliest, latest) from None
        if priority_rank:
            _priority_audit(entry, actor=actor, previous=0, reason="set at creation", idempotency_key=idempotency_key)
        return entry


def _duplicate(clinic: Clinic, patient: Patient, treatment: Treatment, earliest: datetime,
               latest: datetime) -> EntryDuplicate:
    existing = (WaitlistEntry.objects.filter(clinic=clinic, patient=patient, treatment=treatment,
                                             status__in=LIVE_ENTRY_STATUSES, earliest__lt=latest, latest__gt=earliest)
                .values_list("ref", flat=True).first())
    return EntryDuplicate(
        "The patient already waits for this treatment in an overlapping window; change or withdraw that entry.",
        fields={"existing": [existing or ""]},
    )


def _priority_audit(entry: WaitlistEntry, *, actor, previous: int, reason: str, idempotency_key: str,
                    correlation_id: str = "") -> None:
    audit_record(actor=actor, action="waitlist.entry_priority", clinic=entry.clinic, target_ref=entry.ref,
                 reason=reason, idempotency_key=idempotency_key, correlation_id=correlation_id or new_correlation_id(),
                 result={"from": previous, "to": entry.priority_rank, "version": entry.version},
                 system_label="priority")


def entry_set_priority(*, clinic: Clinic, entry_ref: str, actor, priority_rank: int, reason: str,
                       expected_version: int | None = None, correlation_id: str = "",
                       idempotency_key: str = "") -> WaitlistEntry:
    """ADMIN: change an open entry's priority (the matcher orders by it); audited with from/to.

    The booking-reliability feed sets the same rank from each new decision (``decision_record``);
    the newest write wins. 409 ``ENTRY_CLOSED`` for a BOOKED/WITHDRAWN entry, ``VERSION_CONFLICT``.
    """
    if not may_run(actor, clinic, "entry_set_priority"):
        raise PermissionDenied("Changing a priority needs the ADMIN role in this clinic.")
    entry_id = scoped_get(WaitlistEntry, clinic, entry_ref).pk
    with transaction.atomic():
        entry = lock_entry(entry_id)
        if entry.status in (EntryStatus.BOOKED, EntryStatus.WITHDRAWN):
            raise Conflict(f"The entry is {entry.status}.", code="ENTRY_CLOSED")
        if expected_version is not None and entry.version != expected_version:
            raise VersionConflict("The entry was changed; reload it.")
        previous = entry.priority_rank
        cas_update(entry, priority_rank=priority_rank)
        _priority_audit(entry, actor=actor, previous=previous, reason=reason, idempotency_key=idempotency_key,
                        correlation_id=correlation_id)
        return entry


def entry_withdraw(*, clinic: Clinic, entry_ref: str, actor, reason: str, expected_version: int | None = None,
                   now: datetime | None = None, correlation_id: str = "") -> WaitlistEntry:
    """Take an entry off the waitlist; an open offer of it is withdrawn and its hold released.

    Withdrawing a WITHDRAWN entry is a no-op; a BOOKED entry is ENTRY_NOT_WITHDRAWABLE.
    """
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    entry_id = scoped_get(WaitlistEntry, clinic, entry_ref).pk
    label = actor_label(actor, "entry_withdraw")
    for _attempt in range(3):
        with transaction.atomic():
            offer_id = (
                Offer.objects.filter(entry_id=entry_id, status__in=ACTIVE_OFFER_STATUSES)
                .values_list("pk", flat=True)
                .first()
            )
            locks = lock_offer_chain(clinic=clinic, offer_id=offer_id) if offer_id else None
            entry = locks.entry if locks else lock_entry(entry_id)
            if locks is None and entry.status in (EntryStatus.OFFERED, EntryStatus.ACCEPTED):
                continue  # an offer was made between the read and the lock: lock it in order
            if locks is not None and locks.offer.status not in ACTIVE_OFFER_STATUSES:
                continue
            if entry.status == EntryStatus.WITHDRAWN:
                return entry
            if entry.status == EntryStatus.BOOKED:
                raise Conflict("The entry is already booked.", code="ENTRY_NOT_WITHDRAWABLE")
            if expected_version is not None and entry.version != expected_version:
                raise VersionConflict("The entry was changed by someone else.")
            if locks is not None:
                if locks.hold.status == HoldStatus.CONSUMED:
                    raise Conflict("The offer is already booked.", code="ENTRY_NOT_WITHDRAWABLE")
                # The entry ends here, not back on the list: it is withdrawn right below.
                close_offer(locks, to_status=OfferStatus.WITHDRAWN, reason_code="ENTRY_WITHDRAWN", actor=label,
                            correlation_id=correlation_id, now=now, reopen_entry=False)
            cas_update(
                entry,
                expected_status=entry.status,
                status=EntryStatus.WITHDRAWN,
                withdraw_reason=reason[:200],
            )
            command_audit(entry, action="entry_withdraw", actor=actor, clinic=clinic, reason=reason,
                          correlation_id=correlation_id, system_label="entry_withdraw")
            return entry
    raise VersionConflict("The entry keeps changing; try again.")
