"""Writers for the shared rows. Call them inside the caller's transaction."""

from __future__ import annotations

from .correlation import current_correlation_id, fresh_correlation_id
from .models import AuditEntry, OutboxMessage


def new_correlation_id() -> str:
    """The id of the request or task in progress, so every row it writes tells one story; a fresh one
    outside any (a shell, a management command)."""
    return current_correlation_id() or fresh_correlation_id()


def actor_label(actor, system: str) -> str:
    """The signed-in user's username, or ``system:<job>``: never a patient's name."""
    if getattr(actor, "is_authenticated", False):
        return actor.get_username()
    return f"system:{system}"


def command_actor(actor, system: str, correlation_id: str = "") -> tuple[str, str]:
    """What every row a command writes says of who and which story: its actor label (``actor_label``) and its
    correlation id (``correlation_id``, else the request's or task's in progress, else a fresh one)."""
    return actor_label(actor, system), correlation_id or new_correlation_id()


def outbox_enqueue(**message) -> OutboxMessage:
    """Write a message (the arguments of ``outbox_message``) in the current transaction; it exists if and only
    if the change commits."""
    row = outbox_message(**message)
    row.save(force_insert=True)
    return row


def outbox_message(
    *,
    topic: str,
    tenant_group_ref: str,
    clinic_ref: str,
    aggregate_ref: str,
    payload: dict,
    channel: str = "",
    correlation_id: str = "",
    recipient_ref: str = "",
) -> OutboxMessage:
    """An outbox message, unsaved: ``outbox_enqueue`` writes it, or a service writes it in a statement of its
    own (dispatch writes an offer's notice with the offer)."""
    return OutboxMessage(
        topic=topic,
        tenant_group_ref=tenant_group_ref,
        clinic_ref=clinic_ref,
        aggregate_ref=aggregate_ref,
        payload=payload,
        channel=channel,
        recipient_ref=recipient_ref,
        correlation_id=correlation_id or new_correlation_id(),
    )


def audit_record(
    *,
    actor,
    action: str,
    clinic=None,
    target_ref: str = "",
    reason: str = "",
    idempotency_key: str = "",
    correlation_id: str = "",
    result: dict | None = None,
    system_label: str = "",
) -> AuditEntry:
    """Record an action; ``actor`` is the signed-in user, or None for a system job named ``system_label``."""
    return AuditEntry.objects.create(
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        actor_label=actor_label(actor, system_label),
        action=action,
        tenant_group_ref=clinic.tenant_group.ref if clinic is not None else "",
        clinic_ref=clinic.ref if clinic is not None else "",
        target_ref=target_ref,
        reason=reason[:500],
        idempotency_key=idempotency_key[:200],
        correlation_id=correlation_id or current_correlation_id(),
        result=result or {},
    )
