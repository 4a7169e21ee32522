"""Notification providers behind one interface, chosen per clinic, plus quiet hours and contact caps.

A provider gets the contact only at send time and never logs it. Failures are DeliveryFailed with a
bounded code; the outbox retries them. A provider outage never touches an offer or a claim.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import smtplib
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import requests
from django.conf import settings
from django.core.mail import send_mail

from .models import OutboxMessage, OutboxStatus
from .outbox import DeliveryDeferred, DeliveryFailed, DeliverySkipped
from .redaction import redact

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Notice:
    """What to send and to whom. ``email``/``phone`` come from the patient row at send time."""

    message_ref: str
    clinic_ref: str
    recipient_ref: str
    language: str
    subject: str
    body: str
    email: str = ""
    phone: str = ""
    link: str = ""


class ConsoleProvider:
    """The demo default: writes the notice to the log with refs, never the contact nor the claim token.

    The link is a bearer credential, so only its digest is logged (``common.redaction``); in
    development the demo's claim links are read from the outbox or the console instead.
    """

    name = "console"

    def send(self, notice: Notice) -> None:
        logger.info("notice message=%s clinic=%s recipient=%s language=%s link=%s", notice.message_ref,
                    notice.clinic_ref, notice.recipient_ref, notice.language, redact(notice.link))


class EmailProvider:
    """Django's email backend (SMTP in production)."""

    name = "email"

    def send(self, notice: Notice) -> None:
        if not notice.email:
            raise DeliveryFailed("NO_CONTACT")
        try:
            send_mail(notice.subject, notice.body, None, [notice.email], fail_silently=False)
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryFailed("SMTP_UNAVAILABLE") from exc


class WebhookProvider:
    """A signed JSON POST for SMS or messaging gateways: ``X-Signature: sha256=<hmac of the body>``."""

    name = "webhook"

    def __init__(self, url: str, secret: str, timeout: tuple[float, float] = (3.0, 10.0)):
        self.url, self.secret, self.timeout = url, secret, timeout

    def send(self, notice: Notice) -> None:
        if not notice.phone and not notice.email:
            raise DeliveryFailed("NO_CONTACT")
        body = json.dumps({"id": notice.message_ref, "to": notice.phone or notice.email, "language": notice.language,
                           "text": notice.body, "link": notice.link}, separators=(",", ":")).encode()
        signature = hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        try:
            response = requests.post(self.url, data=body, timeout=self.timeout, headers={
                "Content-Type": "application/json", "X-Signature": f"sha256={signature}",
                "Idempotency-Key": notice.message_ref})
        except requests.Timeout as exc:
            raise DeliveryFailed("WEBHOOK_TIMEOUT") from exc
        except requests.RequestException as exc:
            raise DeliveryFailed("WEBHOOK_UNAVAILABLE") from exc
        if response.status_code >= 500:
            raise DeliveryFailed("WEBHOOK_UNAVAILABLE")
        if response.status_code >= 400:
            raise DeliveryFailed("WEBHOOK_REJECTED")


def provider_for(clinic_settings: dict):
    """``clinic.settings["notification"]``: ``{"provider": "console"|"email"|"webhook", "webhook_url": …}``.

    The webhook secret comes from the environment (``NOTIFY_WEBHOOK_SECRET``), never from the row.
    """
    config = (clinic_settings or {}).get("notification") or {}
    kind = config.get("provider", getattr(settings, "NOTIFY_DEFAULT_PROVIDER", "console"))
    if kind == "email":
        return EmailProvider()
    if kind == "webhook":
        return WebhookProvider(config.get("webhook_url", ""), getattr(settings, "NOTIFY_WEBHOOK_SECRET", ""))
    return ConsoleProvider()


def quiet_hours_until(clinic_settings: dict, tz_name: str, now: datetime) -> datetime | None:
    """The end of the clinic's quiet hours if ``now`` falls inside them (``{"start": "21:00", "end": "08:00"}``)."""
    quiet = (clinic_settings or {}).get("quiet_hours")
    if not quiet:
        return None
    zone = ZoneInfo(tz_name)
    local = now.astimezone(zone)
    start, end = time.fromisoformat(quiet["start"]), time.fromisoformat(quiet["end"])
    current = local.time()
    inside = (start <= current or current < end) if start > end else (start <= current < end)
    if not inside:
        return None
    end_day = local.date() if current < end else local.date() + timedelta(days=1)
    return datetime.combine(end_day, end, tzinfo=zone)


def contact_cap_until(recipient_ref: str, cap_per_day: int, now: datetime) -> datetime | None:
    """When the patient may be contacted again if ``cap_per_day`` sends in the last 24 h were reached."""
    if not recipient_ref or cap_per_day <= 0:
        return None
    window_start = now - timedelta(days=1)
    recent = list(
        OutboxMessage.objects.filter(recipient_ref=recipient_ref, status=OutboxStatus.SENT, sent_at__gt=window_start)
        .order_by("sent_at")
        .values_list("sent_at", flat=True)[:cap_per_day]
    )
    if len(recent) < cap_per_day:
        return None
    return recent[0] + timedelta(days=1)


def check_send_window(*, clinic_settings: dict, tz_name: str, recipient_ref: str, now: datetime) -> None:
    """Raise DeliveryDeferred during quiet hours or past the per-patient daily contact cap."""
    until = quiet_hours_until(clinic_settings, tz_name, now)
    if until is not None:
        raise DeliveryDeferred(until, "QUIET_HOURS")
    cap = int((clinic_settings or {}).get("contact_cap_per_day", getattr(settings, "NOTIFY_CONTACT_CAP_PER_DAY", 3)))
    until = contact_cap_until(recipient_ref, cap, now)
    if until is not None:
        raise DeliveryDeferred(until, "CONTACT_CAP")


def contact_allowed(patient, purpose: str) -> bool:
    """The single consent gate for patient notices.

    Patient contact consent lives in ``scheduling`` (being added in parallel); wire its check here so
    every patient notice (``send_patient_notice``) honours it. ``purpose`` names the kind of notice
    (e.g. ``"reevaluation.change"``) for purpose-bound consent.
    """
    return True


def send_patient_notice(*, message: OutboxMessage, clinic, patient, purpose: str, subject: str, body: str,
                        link: str = "", now: datetime) -> str:
    """Send one notice to a patient through the clinic's provider; returns the provider name.

    The same rules as waitlist offers: consent first (``contact_allowed``; no consent → skipped, not
    retried), quiet hours and the daily contact cap defer, the contact is read from the patient row
    only here and goes only to the provider, never to a log.
    """
    if not contact_allowed(patient, purpose):
        raise DeliverySkipped("NO_CONSENT")
    check_send_window(clinic_settings=clinic.settings, tz_name=clinic.timezone,
                      recipient_ref=message.recipient_ref or patient.ref, now=now)
    provider = provider_for(clinic.settings)
    provider.send(Notice(message_ref=message.ref, clinic_ref=clinic.ref, recipient_ref=patient.ref,
                         language=patient.language, subject=subject, body=body, email=patient.email,
                         phone=patient.phone, link=link))
    return provider.name
