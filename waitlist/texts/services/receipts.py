"""Delivery receipts: a text's state moves forward with each receipt; a failed text falls back to e-mail once.

The fallback is the same notice queued again as an outbox row with ``channel: EMAIL`` in its payload (its handler
then skips the text path), so it keeps every rule of the first: the offer must still be open, consent on the
channel, quiet hours and the daily contact cap (the cap counts the sent text and the e-mail alike: both are sent
outbox rows of the patient). Only where the patient has an e-mail address and a GRANTED e-mail consent.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from common.cas import cas_update_all
from common.models import OutboxMessage
from common.services import outbox_enqueue
from scheduling.models import ConsentState, ContactChannel
from scheduling.services.consent import consent_current
from waitlist.models import OFFER_TOPIC
from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC
from waitlist.texts.models import FAILED_STATUSES, TextMessage, TextStatus
from waitlist.texts.services.send import EMAIL_ONLY

logger = logging.getLogger("waitlist")

#: ``fallback_ref`` of a failed text with no e-mail to fall back to (no address or no consent).
NO_FALLBACK = "NONE"


def text_status_record(*, sid: str, status: str, error_code: str = "", now: datetime) -> TextMessage | None:
    """Record a receipt for the text ``sid``; None (nothing changed) for a text not ours or a status not known.
    A receipt the state table does not allow (``sent`` after ``delivered``, a second failure) changes nothing;
    the move into a failure queues the e-mail fallback in the same transaction, so it happens once."""
    status = (status or "").upper()
    if status not in TextStatus.values or status == TextStatus.PENDING or not sid:
        return None
    with transaction.atomic():
        moved = cas_update_all(TextMessage.objects.filter(provider_sid=sid), status=status,
                               error_code=(error_code or "")[:12], status_at=now)
        text = TextMessage.objects.select_related("patient").filter(provider_sid=sid).first()
        if moved and text is not None and status in FAILED_STATUSES and not text.fallback_ref:
            text.fallback_ref = _fallback(text)
            TextMessage.objects.filter(pk=text.pk).update(fallback_ref=text.fallback_ref)
        return text


def _fallback(text: TextMessage) -> str:
    """Queue the failed text's notice again for e-mail (once); its ref, or ``NO_FALLBACK``."""
    patient = text.patient
    if not patient.email or consent_current(patient.pk)[ContactChannel.EMAIL] != ConsentState.GRANTED:
        return NO_FALLBACK
    original = OutboxMessage.objects.filter(ref=text.outbox_ref).first()
    if original is None:
        return NO_FALLBACK
    fields = {"tenant_group_ref": original.tenant_group_ref, "clinic_ref": original.clinic_ref,
              "aggregate_ref": original.aggregate_ref, "channel": "email", "correlation_id": original.correlation_id,
              "recipient_ref": original.recipient_ref,
              "payload": {**(original.payload or {}), "channel": EMAIL_ONLY, "fallback_of": text.ref}}
    if original.topic == BOOKING_CONFIRMED_TOPIC:
        row = outbox_enqueue(topic=BOOKING_CONFIRMED_TOPIC, **fields)
    elif original.topic == OFFER_TOPIC:
        row = outbox_enqueue(topic=OFFER_TOPIC, **fields)
    else:
        return NO_FALLBACK
    logger.info("text %s failed: e-mail fallback %s queued", text.ref, row.ref)
    return row.ref
