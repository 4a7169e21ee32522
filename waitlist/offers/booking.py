"""The booking handoff: an ACCEPTED hold becomes a CONFIRMED appointment through scheduling."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from common.cas import cas_update
from common.errors import Conflict
from common.services import actor_label, new_correlation_id
from scheduling.models import Appointment, Clinic, HoldStatus
from scheduling.services import hold_book
from waitlist.dispatch.locks import lock_offer_chain
from waitlist.effects import event_append
from waitlist.models import EntryStatus, Offer, OfferStatus, VacancyStatus
from waitlist.notices.confirmation_services import booking_confirmation_queue


def offer_book(
    *, clinic: Clinic, hold_ref: str, actor=None, now: datetime | None = None, correlation_id: str = "",
    release_until: datetime | None = None,
) -> tuple[Appointment, bool]:
    """Book the hold of an ACCEPTED offer: CONFIRMED appointment, entry BOOKED, vacancy FILLED.

    One transaction, locks in the fixed order (vacancy → offer → hold/allocation → entry →
    appointment). Retrying after success returns the same appointment (created=False). On any
    refusal nothing changes, so the hold stays ACCEPTED for reconcile. A hold that no offer owns
    is booked by scheduling alone.
    """
    now = now or timezone.now()
    with transaction.atomic():
        offer_id = (
            Offer.objects.filter(clinic=clinic, hold__ref=hold_ref if isinstance(hold_ref, str) else "")
            .values_list("pk", flat=True)
            .first()
        )
        if offer_id is None:
            return hold_book(clinic=clinic, hold_ref=hold_ref)
        locks = lock_offer_chain(clinic=clinic, offer_id=offer_id)
        offer, hold, entry, vacancy = locks.offer, locks.hold, locks.entry, locks.vacancy
        if hold.status == HoldStatus.CONSUMED:
            return hold_book(clinic=clinic, hold_ref=hold_ref)  # idempotent replay
        if offer.status != OfferStatus.ACCEPTED or hold.status != HoldStatus.ACCEPTED:
            raise Conflict(f"The hold is {hold.status}.", code="HOLD_NOT_BOOKABLE")
        if now >= hold.expires_at:
            raise Conflict("The hold has expired.", code="HOLD_NOT_BOOKABLE")
        if entry.status != EntryStatus.ACCEPTED:
            raise Conflict(f"The entry is {entry.status}.", code="HOLD_NOT_BOOKABLE")
        appointment, created = hold_book(clinic=clinic, hold_ref=hold_ref)
        cas_update(entry, expected_status=EntryStatus.ACCEPTED, status=EntryStatus.BOOKED)
        cas_update(vacancy, expected_status=vacancy.status, status=VacancyStatus.FILLED)
        correlation_id = correlation_id or new_correlation_id()
        event_append(
            offer=offer,
            from_status=OfferStatus.ACCEPTED,
            to_status=OfferStatus.ACCEPTED,
            reason_code="BOOKED",
            actor=actor_label(actor, "book"),
            correlation_id=correlation_id,
            now=now,
            detail={"appointment": appointment.ref, "hold": hold.ref},
        )
        if created:
            booking_confirmation_queue(offer=offer, appointment=appointment, correlation_id=correlation_id, now=now,
                                       release_until=release_until)
        return appointment, created
