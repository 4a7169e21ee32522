"""Helpers shared by the waitlist commands: event rows, actor labels, dispatch on commit, dispatch notes."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import connection

from common import effects
from common.cas import sql_states
from common.services import audit_record
from waitlist.models import EntryStatus, Offer, OfferEvent, Vacancy

logger = logging.getLogger("waitlist")


def command_audit(target, *, action: str, actor, clinic, reason: str, correlation_id: str, system_label: str,
                  idempotency_key: str = "", **result) -> None:
    """The audit row of a staff command on ``target`` (a vacancy, offer or entry): its status and version
    after the command, and what else the command names in ``result``."""
    audit_record(actor=actor, action=f"waitlist.{action}", clinic=clinic, target_ref=target.ref, reason=reason,
                 correlation_id=correlation_id, idempotency_key=idempotency_key, system_label=system_label,
                 result={"status": target.status, "version": target.version, **result})


def slot_of(source) -> dict:
    """The slot an appointment, vacancy or hold stands for: who, what, where and when."""
    return {"practitioner_id": source.practitioner_id, "treatment_id": source.treatment_id,
            "resource_id": source.resource_id, "starts_at": source.starts_at, "ends_at": source.ends_at}


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
    transition = {"from_status": from_status, "to_status": to_status, "reason_code": reason_code, "actor": actor}
    event = OfferEvent.objects.create(
        clinic_id=offer.clinic_id, offer=offer, correlation_id=correlation_id or offer.correlation_id,
        detail=detail or {}, created_at=now, **transition,
    )
    event_logged(offer=offer, correlation_id=event.correlation_id, **transition)
    return event


def event_logged(*, offer: Offer, from_status: str, to_status: str, reason_code: str, actor: str,
                 correlation_id: str) -> None:
    """The log line of an offer event (for commands that write the event row in their own statement)."""
    logger.info(
        "offer %s %s->%s reason=%s actor=%s correlation=%s",
        offer.ref,
        from_status or "-",
        to_status,
        reason_code,
        actor,
        correlation_id,
    )


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


_NOTE_SQL = """
INSERT INTO waitlist_dispatchnote
    (clinic_id, vacancy_id, entry_id, reason_code, until, times, first_at, last_at, correlation_id)
VALUES (%(clinic)s, %(vacancy)s, %(entry)s, %(reason)s, %(until)s, 1, %(now)s, %(now)s, %(correlation)s)
ON CONFLICT ON CONSTRAINT wl_note_once DO UPDATE
SET times = waitlist_dispatchnote.times + 1, until = EXCLUDED.until, last_at = EXCLUDED.last_at,
    correlation_id = EXCLUDED.correlation_id
"""


# The held ones only: an entry a racer has already taken (no longer WAITING at the version read) is not noted.
_LOCKED_NOTES_SQL = f"""
INSERT INTO waitlist_dispatchnote
    (clinic_id, vacancy_id, entry_id, reason_code, until, times, first_at, last_at, correlation_id)
SELECT %(clinic)s, %(vacancy)s, e.id, 'ENTRY_LOCKED', NULL, 1, %(now)s, %(now)s, %(correlation)s
FROM waitlist_waitlistentry e
WHERE (e.id, e.version) IN (SELECT * FROM unnest(%(ids)s::bigint[], %(versions)s::bigint[]))
  AND e.status IN ({sql_states(EntryStatus.WAITING)})
ON CONFLICT ON CONSTRAINT wl_note_once DO UPDATE
SET times = waitlist_dispatchnote.times + 1, until = EXCLUDED.until, last_at = EXCLUDED.last_at,
    correlation_id = EXCLUDED.correlation_id
"""


def notes_entry_locked(*, vacancy: Vacancy, entries: list[tuple[int, int]], now: datetime,
                       correlation_id: str = "") -> None:
    """``ENTRY_LOCKED`` notes (one per entry, as ``note_record``) for each of ``entries`` ((id, version) as
    read) that another transaction held when promotion passed over it, in one statement: racing dispatchers
    pass over many at once."""
    if not entries:
        return
    params: dict[str, Any] = {"clinic": vacancy.clinic_id, "vacancy": vacancy.pk, "ids": [e for e, _v in entries],
              "versions": [v for _e, v in entries], "now": now, "correlation": correlation_id}
    with connection.cursor() as cursor:
        cursor.execute(_LOCKED_NOTES_SQL, params)
    logger.info("vacancy %s passes over %s held entries: ENTRY_LOCKED", vacancy.ref, len(entries))


def note_record(*, vacancy: Vacancy, reason_code: str, now: datetime, entry_id: int | None = None,
                until: datetime | None = None, correlation_id: str = "") -> None:
    """Record (or count again) why dispatch passed over ``entry_id`` or why the vacancy waits."""
    with connection.cursor() as cursor:
        cursor.execute(
            _NOTE_SQL,
            {
                "clinic": vacancy.clinic_id,
                "vacancy": vacancy.pk,
                "entry": entry_id,
                "reason": reason_code,
                "until": until,
                "now": now,
                "correlation": correlation_id,
            },
        )
    logger.info("vacancy %s passes over entry %s: %s", vacancy.ref, entry_id or "-", reason_code)
