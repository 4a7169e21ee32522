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
import urllib3
from django.conf import settings
from django.core.mail import EmailMessage

from . import egress, queries
from .models import OutboxMessage
from .outbox import DeliveryDeferred, DeliveryFailed
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
    #: Files for providers that can carry them (email): ``(filename, content, mimetype)``. A provider that
    #: cannot (SMS, webhook) relies on ``link``/the body instead.
    attachments: tuple[tuple[str, str, str], ...] = ()


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
            EmailMessage(notice.subject, notice.body, None, [notice.email],
                         attachments=list(notice.attachments)).send(fail_silently=False)
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryFailed("SMTP_UNAVAILABLE") from exc


class WebhookProvider:
    """A signed JSON POST for SMS or messaging gateways: ``X-Signature: sha256=<hmac of the body>``, to the address
    the egress guard (``common.egress``: https, public or on ``allow``) checked at this send, over one kept-alive
    connection per process and address (urllib3 itself: ``requests`` reads the environment again for every POST,
    about half of a notice's send in the storm, benchmark 6)."""

    name = "webhook"

    def __init__(self, url: str, secret: str, timeout: tuple[float, float] = (3.0, 10.0),
                 allow: list[egress.Allowed] | None = None):
        self.url, self.secret, self.timeout = url, secret, timeout
        self.allow = egress.allowlist_for(None) if allow is None else allow

    def send(self, notice: Notice) -> None:
        if not notice.phone and not notice.email:
            raise DeliveryFailed("NO_CONTACT")
        body = json.dumps({"id": notice.message_ref, "to": notice.phone or notice.email, "language": notice.language,
                           "text": notice.body, "link": notice.link}, separators=(",", ":")).encode()
        signature = hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        try:
            target = egress.check_url(self.url, self.allow, field="webhook_url")
        except egress.EgressRefused as exc:
            raise DeliveryFailed("WEBHOOK_BLOCKED") from exc
        try:
            response = egress.post(
                target, body=body, timeout=urllib3.Timeout(connect=self.timeout[0], read=self.timeout[1]), headers={
                    "Content-Type": "application/json", "X-Signature": f"sha256={signature}",
                    "Idempotency-Key": notice.message_ref})
        except urllib3.exceptions.NewConnectionError as exc:  # refused, unresolved (a ConnectTimeoutError in urllib3)
            raise DeliveryFailed("WEBHOOK_UNAVAILABLE") from exc
        except urllib3.exceptions.TimeoutError as exc:
            raise DeliveryFailed("WEBHOOK_TIMEOUT") from exc
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise DeliveryFailed("WEBHOOK_UNAVAILABLE") from exc
        if response.status >= 500:
            raise DeliveryFailed("WEBHOOK_UNAVAILABLE")
        if response.status >= 300:  # a redirect is not a gateway taking the notice: the body would not follow
            raise DeliveryFailed("WEBHOOK_REJECTED")


@dataclass(frozen=True)
class TextSent:
    """What a text provider says of a text it took: its message id (``sid``, the key of its delivery receipts
    and of the patient's reply) and its first status (``queued``, ``sent``, …)."""

    sid: str
    status: str


class ConsoleTextProvider:
    """The demo's text channel (``make run`` with no provider configured): prints the text itself, because the
    README's tour copies its reply code and short link. Only with ``NOTIFY_CONSOLE_TEXTS`` (development);
    production never prints a patient's message."""

    name = "console"

    def send_text(self, *, to: str, body: str, message_ref: str) -> TextSent:
        print(f"[text {message_ref}]\n{body}\n", flush=True)  # noqa: T201 - the demo's phone screen
        return TextSent(sid=f"SMconsole{hashlib.sha256(message_ref.encode()).hexdigest()[:24]}", status="sent")


_TWILIO_LOG = logging.getLogger("common.notify.twilio")
_TWILIO_LOG.setLevel(logging.WARNING)


class TwilioTextProvider:
    """Texts through Twilio's Programmable Messaging REST API with its official library: ``Messages.create``
    with a status callback URL (delivery receipts come back to ``/texts/twilio/status``).

    ``TWILIO_API_BASE_URL`` points the library at another host (a loopback gateway in the tests, a staging
    mock): Twilio's documented way is a custom HTTP client, here one that rewrites ``https://api.twilio.com``.
    Errors become bounded codes: ``TWILIO_REJECTED`` (4xx: a bad number, an unsubscribed recipient; not worth
    retrying, but the outbox bounds it anyway) and ``TWILIO_UNAVAILABLE`` (network, 5xx)."""

    name = "twilio"

    def __init__(self, *, account_sid: str, auth_token: str, sender: str, status_callback: str,
                 base_url: str = "", timeout: float = 10.0):
        from twilio.http.http_client import TwilioHttpClient
        from twilio.rest import Client

        class _BaseUrlClient(TwilioHttpClient):
            def request(self, method, url, *args, **kwargs):
                if base_url and url.startswith("https://api.twilio.com"):
                    url = base_url.rstrip("/") + url[len("https://api.twilio.com"):]
                return super().request(method, url, *args, **kwargs)

        # base_url is the operator's setting (TWILIO_API_BASE_URL), not a clinic's choice: no egress allowlist;
        # production refuses to start unless it is https without credentials (common.checks).
        self.sender, self.status_callback = sender, status_callback
        # The library logs each request at INFO on its own logger; this one keeps only its warnings.
        self.client = Client(account_sid, auth_token, http_client=_BaseUrlClient(timeout=timeout, logger=_TWILIO_LOG))

    def send_text(self, *, to: str, body: str, message_ref: str) -> TextSent:
        from twilio.base.exceptions import TwilioException, TwilioRestException

        if not to:
            raise DeliveryFailed("NO_CONTACT")
        try:
            sent = self.client.messages.create(to=to, from_=self.sender, body=body,
                                               status_callback=self.status_callback or None)
        except TwilioRestException as exc:
            raise DeliveryFailed("TWILIO_UNAVAILABLE" if exc.status >= 500 else "TWILIO_REJECTED") from exc
        except (TwilioException, requests.RequestException, OSError) as exc:
            raise DeliveryFailed("TWILIO_UNAVAILABLE") from exc
        return TextSent(sid=str(sent.sid or ""), status=str(sent.status or "queued"))


def provider_kind(clinic_settings: dict) -> str:
    """The clinic's ``notification.provider`` (else ``NOTIFY_DEFAULT_PROVIDER``)."""
    config = (clinic_settings or {}).get("notification") or {}
    return str(config.get("provider", getattr(settings, "NOTIFY_DEFAULT_PROVIDER", "console")))


def text_provider_for(clinic_settings: dict):
    """The clinic's text channel, or None: Twilio for provider ``sms`` (``TWILIO_*`` from the environment, never
    from the row), the console when the clinic uses the console and ``NOTIFY_CONSOLE_TEXTS`` is on."""
    kind = provider_kind(clinic_settings)
    if kind == "sms":
        return TwilioTextProvider(
            account_sid=settings.TWILIO_ACCOUNT_SID, auth_token=settings.TWILIO_AUTH_TOKEN,
            sender=settings.TWILIO_FROM, base_url=settings.TWILIO_API_BASE_URL,
            status_callback=twilio_webhook_url("status"))
    if kind == "console" and getattr(settings, "NOTIFY_CONSOLE_TEXTS", False):
        return ConsoleTextProvider()
    return None


def twilio_webhook_url(name: str) -> str:
    """The public URL of a Twilio webhook (``status`` or ``inbound``): what Twilio posts to and signs."""
    base = getattr(settings, "TWILIO_WEBHOOK_BASE_URL", "") or settings.PUBLIC_BASE_URL
    return f"{base.rstrip('/')}/texts/twilio/{name}"


def provider_for(clinic_settings: dict):
    """``clinic.settings["notification"]``: ``{"provider": "console"|"email"|"webhook"|"sms", "webhook_url": …}``
    (set by ``manage.py clinic_integration``, checked there and at each send against the clinic's egress allowlist).

    The webhook secret comes from the environment (``NOTIFY_WEBHOOK_SECRET``), never from the row. ``sms``
    clinics text first (``text_provider_for``); what is not a text (no phone or no SMS consent, a fallback)
    goes by e-mail, so this is their e-mail provider.
    """
    config = (clinic_settings or {}).get("notification") or {}
    kind = provider_kind(clinic_settings)
    if kind in ("email", "sms"):
        return EmailProvider()
    if kind == "webhook":
        return WebhookProvider(config.get("webhook_url", ""), getattr(settings, "NOTIFY_WEBHOOK_SECRET", ""),
                               allow=egress.allowlist_for(clinic_settings))
    return ConsoleProvider()


def quiet_hours_until(start: time | None, end: time | None, tz_name: str, now: datetime) -> datetime | None:
    """The end of quiet hours ``start``–``end`` (clinic-local, may cross midnight) if ``now`` is inside them."""
    if start is None or end is None or start == end:
        return None
    zone = ZoneInfo(tz_name)
    local = now.astimezone(zone)
    current = local.time()
    inside = (start <= current or current < end) if start > end else (start <= current < end)
    if not inside:
        return None
    end_day = local.date() if current < end else local.date() + timedelta(days=1)
    return datetime.combine(end_day, end, tzinfo=zone)


def contact_cap_params(cap_per_day: int | None, now: datetime) -> dict:
    """The parameters of ``cw_recent_sends`` (``common.queries``) as another statement names them."""
    return {"cap_since": now - timedelta(days=1), "cap_limit": max(cap_per_day or 0, 0)}


def contact_cap_until(recipient_ref: str, cap_per_day: int | None, now: datetime,
                      sent: list[datetime] | None = None) -> datetime | None:
    """When the patient may be contacted again if ``cap_per_day`` sends in the last 24 h were reached.
    ``sent``: those sends as ``cw_recent_sends`` read them in another statement (else read here)."""
    if not recipient_ref or not cap_per_day or cap_per_day <= 0:
        return None
    if sent is None:
        params = contact_cap_params(cap_per_day, now)
        sent = queries.outbox_recent_sends(recipient_ref, since=params["cap_since"], limit=params["cap_limit"])
    recent = sent[:cap_per_day]
    if len(recent) < cap_per_day:
        return None
    return recent[0] + timedelta(days=1)  # sent_at__gt above: never NULL


@dataclass(frozen=True)
class SendWindow:
    """Where a clinic may contact patients: quiet hours (clinic-local) and a per-patient daily cap."""

    tz_name: str
    quiet_start: time | None = None
    quiet_end: time | None = None
    cap_per_day: int | None = None


@dataclass(frozen=True)
class SendWindowNow:
    """``send_window_now``'s answer: ``block``, ``("QUIET_HOURS"|"CONTACT_CAP", until)`` when a notice may not go
    out now (else None), and ``cap_params``, the parameters of ``cw_recent_sends`` for this window now
    (``contact_cap_params``), for a caller that reads a recipient's recent sends in a statement of its own."""

    block: tuple[str, datetime] | None
    cap_params: dict


def send_window_now(window: SendWindow, *, recipient_ref: str = "", now: datetime,
                    sent: list[datetime] | None = None) -> SendWindowNow:
    """Whether a notice may go out now under ``window`` (``send_window_block``), with the contact cap's statement
    parameters: one call for a caller (dispatch) that checks the quiet hours first and reads the recent sends of
    each recipient later (then passes them as ``sent``)."""
    return SendWindowNow(send_window_block(window, recipient_ref=recipient_ref, now=now, sent=sent),
                         contact_cap_params(window.cap_per_day, now))


def send_window_block(window: SendWindow, *, recipient_ref: str, now: datetime,
                      sent: list[datetime] | None = None) -> tuple[str, datetime] | None:
    """``("QUIET_HOURS"|"CONTACT_CAP", until)`` when a notice may not go out now, else None.

    Without ``recipient_ref`` only the clinic-wide quiet hours are checked. ``sent``: the recipient's recent
    sends, already read (``cw_recent_sends``).
    """
    until = quiet_hours_until(window.quiet_start, window.quiet_end, window.tz_name, now)
    if until is not None:
        return "QUIET_HOURS", until
    until = contact_cap_until(recipient_ref, window.cap_per_day, now, sent)
    if until is not None:
        return "CONTACT_CAP", until
    return None


def check_send_window(window: SendWindow, *, recipient_ref: str, now: datetime) -> None:
    """Raise DeliveryDeferred during quiet hours or past the per-patient daily contact cap."""
    block = send_window_block(window, recipient_ref=recipient_ref, now=now)
    if block is not None:
        raise DeliveryDeferred(block[1], block[0])


def send_patient_notice(*, message: OutboxMessage, clinic, patient, window: SendWindow, subject: str, body: str,
                        link: str = "", attachments: tuple[tuple[str, str, str], ...] = (), now: datetime) -> str:
    """Send one notice to a patient through the clinic's provider; returns the provider name.

    The same rules as waitlist offers: the caller checked consent (it lives in ``scheduling``);
    quiet hours and the daily contact cap (``window``) defer; the contact is read from the patient
    row only here and goes only to the provider, never to a log.
    """
    check_send_window(window, recipient_ref=message.recipient_ref or patient.ref, now=now)
    provider = provider_for(clinic.settings)
    provider.send(Notice(message_ref=message.ref, clinic_ref=clinic.ref, recipient_ref=patient.ref,
                         language=patient.language, subject=subject, body=body, email=patient.email,
                         phone=patient.phone, link=link, attachments=attachments))
    return provider.name
