"""The text path of the outbox handlers: an offer's notice and a booking's confirmation go by text first.

A notice goes by text when the clinic has a text channel (``common.notify.text_provider_for``), the patient a
phone number and a GRANTED SMS consent, and the notice is not an e-mail fallback (payload ``channel: EMAIL``).
Otherwise the handler sends it as before (e-mail, webhook, console). The text's row (``TextMessage``) is written
before the send, so a receipt or a reply that arrives at once finds it; a retried send reuses the row and its
reply code, with a fresh short link.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from common.cas import cas_update_all
from common.models import OutboxMessage
from common.notify import text_provider_for
from scheduling.models import ConsentState, ContactChannel
from scheduling.services.consent import consent_current
from waitlist.texts.models import TextKind, TextMessage, TextStatus

#: The payload's ``channel`` of a notice that must not be a text (the e-mail fallback of a failed one).
EMAIL_ONLY = "EMAIL"


def link_digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def short_link(code: str) -> str:
    return f"{settings.PUBLIC_BASE_URL.rstrip('/')}/c/{code}"


def text_channel(message: OutboxMessage, clinic, patient):
    """The clinic's text provider when this notice goes by text, else None."""
    if (message.payload or {}).get("channel") == EMAIL_ONLY or not patient.phone:
        return None
    provider = text_provider_for(clinic.settings)
    if provider is None or consent_current(patient.pk)[ContactChannel.SMS] != ConsentState.GRANTED:
        return None
    return provider


def _reply_code(patient, now: datetime) -> str:
    """4 digits no other text of the patient's in the reply window carries (so a code names one text)."""
    taken = set(TextMessage.objects.filter(patient=patient, created_at__gte=now - timedelta(
        days=settings.TEXT_REPLY_DAYS)).values_list("reply_code", flat=True))
    while True:
        code = f"{1000 + secrets.randbelow(9000)}"
        if code not in taken:
            return code


def text_send(provider, *, message: OutboxMessage, clinic, patient, kind: str, offer, now: datetime,
              compose) -> str:
    """Send the notice as a text: ``compose(code, link)`` gives its words. Returns the provider's name; a
    provider failure raises ``DeliveryFailed`` (the outbox retries it)."""
    link_code = secrets.token_urlsafe(8)
    with transaction.atomic():
        text = TextMessage.objects.select_for_update(no_key=True).filter(outbox_ref=message.ref).first()
        if text is None:
            text = TextMessage.objects.create(
                clinic=clinic, patient=patient, offer=offer, kind=kind, outbox_ref=message.ref,
                reply_code=_reply_code(patient, now), link_digest=link_digest(link_code), created_at=now)
        else:
            text.link_digest = link_digest(link_code)
            text.save(update_fields=["link_digest"])
    body = compose(text.reply_code, short_link(link_code))
    sent = provider.send_text(to=patient.phone, body=body, message_ref=message.ref)
    status = sent.status.upper() if sent.status.upper() in TextStatus.values else TextStatus.QUEUED
    if status == TextStatus.PENDING:
        status = TextStatus.QUEUED
    cas_update_all(TextMessage.objects.filter(pk=text.pk), status=status, provider=provider.name,
                   provider_sid=sent.sid or None, status_at=now)
    return provider.name


__all__ = ["EMAIL_ONLY", "TextKind", "link_digest", "short_link", "text_channel", "text_send"]
