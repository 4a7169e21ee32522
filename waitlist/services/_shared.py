"""Helpers shared by the waitlist commands: event rows, actor labels, dispatch on commit."""

from __future__ import annotations

import logging
from datetime import datetime

from common.degrade import send_after_commit

from ..models import Offer, OfferEvent

logger = logging.getLogger("waitlist")


def actor_label(actor, system: str) -> str:
    """The signed-in user's username, or ``system:<job>``: never a patient's name."""
    if getattr(actor, "is_authenticated", False):
        return actor.get_username()
    return f"system:{system}"


def event_append(
    *,
    offer: Offer,
    from_status: str,
    to_status: str,
    reason_code: str,
    actor: str,
    correlation_id: str,
    now: datetime,
    detail: dict | None = None,
) -> OfferEvent:
    """Append one transition to the offer's history (refs and codes only) and log it the same way."""
    event = OfferEvent.objects.create(
        clinic_id=offer.clinic_id,
        offer=offer,
        from_status=from_status,
        to_status=to_status,
        reason_code=reason_code,
        actor=actor,
        correlation_id=correlation_id or offer.correlation_id,
        detail=detail or {},
        created_at=now,
    )
    logger.info(
        "offer %s %s->%s reason=%s actor=%s correlation=%s",
        offer.ref,
        from_status or "-",
        to_status,
        reason_code,
        actor,
        event.correlation_id,
    )
    return event


def queue_dispatch(vacancy_id: int) -> None:
    """Cascade to the next candidate after this transaction commits (never inside it). With the
    broker down the send is logged once and the open vacancy is left to reconcile."""
    from .. import tasks  # tasks import services: resolve at call time

    send_after_commit(tasks.dispatch_vacancy, vacancy_id)
