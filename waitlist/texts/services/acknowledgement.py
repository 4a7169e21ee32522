"""An automatic booking counts once it is seen (issue 39 part 3).

A standing acceptance books at once (``services.standing.standing_book``), which records a ``BookingAck``
(``acknowledgement_expect``, in the booking's transaction). The patient acknowledges it by a reply to the
"you are booked" text, by opening its link (the short link or the claim page) or by fetching the calendar file
(``acknowledgement_record``). Unacknowledged at ``remind_at`` — the later of the policy's
``ack_remind_after_minutes`` (default 120) after the booking and ``ack_remind_before_slot_hours`` (24) before
the slot, never later than ``WAITLIST_ACK_REMIND_LEAD_MINUTES`` (60) before the release point — the "you are
booked" notice goes again (by text first). Unacknowledged at ``release_at``
(``WAITLIST_ACK_RELEASE_LEAD_MINUTES``, 10, before the booking's ``release_until``, the last moment the slot can
be reopened with lead enough to refill it), the booking is released through ``standing_release`` (scheduling's
cancel, the vacancy OPEN again and its cascade queued), audited with reason ``UNACKNOWLEDGED``.
``acknowledgements_run`` is beat's job.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import cast

from django.conf import settings
from django.db import transaction
from django.db.models import Field
from django.utils import timezone

from common.errors import DomainError
from common.services import audit_record, new_correlation_id, outbox_enqueue
from waitlist.models import Offer, OfferStatus, WaitlistPolicy
from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC
from waitlist.texts.models import BookingAck

logger = logging.getLogger("waitlist")


def _policy_value(policy: WaitlistPolicy | None, name: str) -> int:
    """The policy's ``name``, or the field's default (a booking made under no policy row, the simulator's
    modelled competitors)."""
    if policy is not None:
        return int(getattr(policy, name))
    return int(cast(Field, WaitlistPolicy._meta.get_field(name)).get_default())  # a concrete field


def ack_times(*, booked_at: datetime, starts_at: datetime, release_until: datetime,
              policy: WaitlistPolicy | None = None) -> tuple[datetime, datetime]:
    """``(remind_at, release_at)`` of an automatic booking made under ``policy`` (the module's rule)."""
    release_at = max(booked_at, release_until - timedelta(minutes=settings.WAITLIST_ACK_RELEASE_LEAD_MINUTES))
    remind_at = max(booked_at + timedelta(minutes=_policy_value(policy, "ack_remind_after_minutes")),
                    starts_at - timedelta(hours=_policy_value(policy, "ack_remind_before_slot_hours")))
    latest = release_at - timedelta(minutes=settings.WAITLIST_ACK_REMIND_LEAD_MINUTES)
    return max(booked_at, min(remind_at, latest)), release_at


def acknowledgement_expect(*, offer: Offer, starts_at: datetime, now: datetime) -> BookingAck | None:
    """In the automatic booking's transaction: the booking now waits to be seen (None without a release point)."""
    if offer.release_until is None:
        return None
    # The offer's own policy version (dispatch set it on the offer it just wrote: no query).
    remind_at, release_at = ack_times(booked_at=now, starts_at=starts_at, release_until=offer.release_until,
                                      policy=offer.policy)
    return BookingAck.objects.create(clinic_id=offer.clinic_id, offer=offer, booked_at=now, starts_at=starts_at,
                                     remind_at=remind_at, release_at=release_at)


def acknowledgement_record(*, offer_id: int, via: str, now: datetime | None = None) -> bool:
    """The patient has seen their automatic booking; True when this acknowledged it (a repeat, a booking already
    released or one not automatic: False, nothing changes)."""
    now = now or timezone.now()
    return BookingAck.objects.filter(offer_id=offer_id, acknowledged_at=None, released_at=None).update(
        acknowledged_at=now, acknowledged_via=via) == 1


def acknowledgement_record_for_appointment(*, appointment_id: int, via: str, now: datetime | None = None) -> bool:
    """``acknowledgement_record`` for the offer an appointment was booked from (the calendar file's fetch)."""
    offer_id = Offer.objects.filter(hold__appointment_id=appointment_id).values_list("pk", flat=True).first()
    return offer_id is not None and acknowledgement_record(offer_id=offer_id, via=via, now=now)


def acknowledgements_run(*, now: datetime | None = None, limit: int = 100) -> dict[str, int]:
    """Remind what is due, release what is past its release point; counts of each."""
    now = now or timezone.now()
    counts = {"reminded": 0, "released": 0}
    open_acks = BookingAck.objects.filter(acknowledged_at=None, released_at=None)
    for ack_id in open_acks.filter(release_at__lte=now).values_list("pk", flat=True)[:limit]:
        counts["released"] += _release(ack_id, now)
    for ack_id in open_acks.filter(reminded_at=None, remind_at__lte=now, release_at__gt=now) \
            .values_list("pk", flat=True)[:limit]:
        counts["reminded"] += _remind(ack_id, now)
    return counts


def _remind(ack_id: int, now: datetime) -> int:
    """Queue the "you are booked" notice again (its handler texts first), once; a booking that no longer stands
    is closed ``NOT_BOOKED`` instead (no reminder, no release)."""
    from common.models import OutboxMessage

    with transaction.atomic():
        ack = (BookingAck.objects.select_for_update(no_key=True)
               .filter(pk=ack_id, acknowledged_at=None, released_at=None, reminded_at=None).first())
        if ack is None:
            return 0
        if ack.offer.status != OfferStatus.ACCEPTED:  # released by the patient, or ended otherwise: no reminder
            ack.released_at, ack.closed_code = now, "NOT_BOOKED"
            ack.save(update_fields=["released_at", "closed_code"])
            return 0
        first = (OutboxMessage.objects.filter(topic=BOOKING_CONFIRMED_TOPIC, payload__offer=ack.offer.ref)
                 .order_by("id").first())
        ack.reminded_at = now
        ack.save(update_fields=["reminded_at"])
        if first is None:
            return 0
        outbox_enqueue(topic=BOOKING_CONFIRMED_TOPIC, tenant_group_ref=first.tenant_group_ref,
                       clinic_ref=first.clinic_ref, aggregate_ref=first.aggregate_ref,
                       payload={**(first.payload or {}), "reminder": True}, channel=first.channel,
                       correlation_id=new_correlation_id(), recipient_ref=first.recipient_ref)
        return 1


def _release(ack_id: int, now: datetime) -> int:
    """Release the unacknowledged booking (``standing_release``: the slot reopens and the cascade runs), audited
    UNACKNOWLEDGED; a booking that cannot be released any more (the patient released it, staff cancelled it) is
    closed with the refusal's code."""
    from waitlist.standing.services import standing_release

    ack = BookingAck.objects.select_related("offer__clinic__tenant_group").filter(pk=ack_id).first()
    if ack is None:
        return 0
    offer = ack.offer
    if offer.status != OfferStatus.ACCEPTED:  # released by the patient, or ended otherwise: nothing to release
        BookingAck.objects.filter(pk=ack_id, released_at=None).update(released_at=now, closed_code="NOT_BOOKED")
        return 0
    correlation_id = new_correlation_id()
    try:
        with transaction.atomic():
            standing_release(clinic=offer.clinic, offer_ref=offer.ref, reason="UNACKNOWLEDGED", now=now,
                             correlation_id=correlation_id)
            closed = BookingAck.objects.filter(pk=ack_id, acknowledged_at=None, released_at=None).update(
                released_at=now, closed_code="UNACKNOWLEDGED")
            if not closed:  # acknowledged meanwhile: the release is undone with the transaction
                raise _Acknowledged()
            audit_record(actor=None, action="text_ack_release", clinic=offer.clinic, target_ref=offer.ref,
                         reason="UNACKNOWLEDGED", correlation_id=correlation_id, system_label="acknowledgement",
                         result={"booked_at": ack.booked_at.isoformat(), "release_at": ack.release_at.isoformat()})
    except _Acknowledged:
        return 0
    except DomainError as exc:
        BookingAck.objects.filter(pk=ack_id, released_at=None).update(released_at=now, closed_code=exc.code[:30])
        logger.info("acknowledgement %s: not released: %s", ack.ref, exc.code)
        return 0
    return 1


class _Acknowledged(Exception):
    """The patient acknowledged while the release ran: roll it back."""
