"""Helpers shared by the waitlist commands: event rows, actor labels, dispatch on commit, dispatch notes."""

from __future__ import annotations

import logging
from datetime import datetime

from common import effects
from common.services import audit_record
from waitlist import queries
from waitlist.models import Offer, OfferEvent, Vacancy

logger = logging.getLogger("waitlist")


def command_audit(target, *, action: str, actor, clinic, reason: str, correlation_id: str, system_label: str,
                  idempotency_key: str = "", **result) -> None:
    """The audit row of a staff command on ``target`` (a vacancy, offer or entry): its status and version
    after the command, and what else the command names in ``result``."""
    audit_record(actor=actor, action=f"waitlist.{action}", clinic=clinic, target_ref=target.ref, reason=reason,
                 correlation_id=correlation_id, idempotency_key=idempotency_key, system_label=system_label,
                 result={"status": target.status, "version": target.version, **result})


#: The fields of the slot an appointment, vacancy or hold stands for (``slot_of``).
SLOT_FIELDS = ("practitioner_id", "treatment_id", "resource_id", "starts_at", "ends_at")


def slot_of(source) -> dict:
    """The slot an appointment, vacancy or hold stands for: who, what, where and when."""
    return {name: getattr(source, name) for name in SLOT_FIELDS}


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
    transition = {"from_status": from_status, "to_status": to_status, "reason_code": reason_code, "actor": actor}
    event = OfferEvent.objects.create(
        clinic_id=offer.clinic_id, offer=offer, correlation_id=correlation_id or offer.correlation_id,
        detail=detail or {}, created_at=now, **transition,
    )
    event_logged(offer=offer, correlation_id=event.correlation_id, **transition)
    return event


#: The log line of an offer event: offer ref, from status ("-": none), to status, reason, actor, correlation id.
EVENT_LOG = "offer %s %s->%s reason=%s actor=%s correlation=%s"


def event_logged(*, offer: Offer, from_status: str, to_status: str, reason_code: str, actor: str,
                 correlation_id: str) -> None:
    """The log line of an offer event (for commands that write the event row in their own statement)."""
    logger.info(EVENT_LOG, offer.ref, from_status or "-", to_status, reason_code, actor, correlation_id)


#: The effect that dispatches a vacancy again (its handler is registered by ``waitlist.tasks``).
DISPATCH_EFFECT = "waitlist.dispatch"


def queue_dispatch(vacancy_id: int) -> None:
    """Cascade to the next candidate after this transaction commits (never inside it). With the
    broker down the send is logged once and the open vacancy is left to reconcile."""
    effects.after_commit(DISPATCH_EFFECT, vacancy_id=vacancy_id)


#: The effect that delivers due notices soon after a commit wrote one (handler registered by ``waitlist.tasks``).
NOTICE_EFFECT = "waitlist.deliver_notices"


def queue_delivery() -> None:
    """Deliver the notices this transaction wrote soon after it commits, not at beat's next outbox tick. With
    the broker down they wait for that tick."""
    effects.after_commit(NOTICE_EFFECT)


def note_record(*, vacancy: Vacancy, reason_code: str, now: datetime, entry_id: int | None = None,
                until: datetime | None = None, correlation_id: str = "") -> None:
    """Record (or count again) why dispatch passed over ``entry_id`` or why the vacancy waits."""
    queries.dispatch_note_upsert(clinic_id=vacancy.clinic_id, vacancy_id=vacancy.pk, entry_id=entry_id,
                                 reason_code=reason_code, until=until, now=now, correlation_id=correlation_id)
    logger.info("vacancy %s passes over entry %s: %s", vacancy.ref, entry_id or "-", reason_code)
