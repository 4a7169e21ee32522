"""Reconcile findings: read by the loop's reconcile (which repairs them) and by the console's Action queue."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q

from scheduling.models import CapacityAllocation, HoldStatus
from waitlist.models import ACTIVE_OFFER_STATUSES, Offer, OfferStatus


def booking_retry_minutes() -> int:
    return int(getattr(settings, "WAITLIST_BOOKING_RETRY_MINUTES", 5))


def stuck_accepted_offers(*, now: datetime):
    """ACCEPTED offers whose booking command started (the ON_ACCEPT claim page asked to book) but whose
    hold is still ACCEPTED N minutes later. An ACCEPTED offer nobody asked to book is not stuck: it
    waits for its booking command until its hold expires."""
    return Offer.objects.filter(
        status=OfferStatus.ACCEPTED,
        hold__status=HoldStatus.ACCEPTED,
        booking_requested_at__isnull=False,
        booking_requested_at__lte=now - timedelta(minutes=booking_retry_minutes()),
    )


def offers_without_active_hold():
    """Active offers (not yet booked) whose hold no longer reserves the slot: invariant 2 broken."""
    active_allocation = CapacityAllocation.objects.filter(hold=OuterRef("hold"), active=True)
    return Offer.objects.filter(status__in=ACTIVE_OFFER_STATUSES).exclude(hold__status=HoldStatus.CONSUMED).filter(
        Q(hold__status=HoldStatus.RELEASED) | ~Exists(active_allocation)
    )
