"""Delivery of a join request's one-time code (outbox topic ``waitlist.join_code``).

The outbox row names the request only. The code is made here, at send time (``join_request_issue_code``: a new
code replaces the earlier one and is stored as an HMAC), and goes to the request's phone as a text, or to its
e-mail when no phone was given, through the clinic's provider. It is the patient's own request of a moment ago,
so quiet hours and the daily contact cap (which count sends to patients) do not hold it back; the request's own
send limit does (``CODE_SENDS``, ``RESEND_AFTER``).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from common.models import OutboxMessage
from common.notify import Notice, provider_for
from common.outbox import DeliverySkipped
from scheduling.models import ContactChannel
from scheduling.services.join_requests import CODE_VALID, join_request_issue_code
from waitlist.notices.offer_notice import LANGUAGES, optout_line

logger = logging.getLogger(__name__)


def code_text(clinic_name: str, code: str, language: str) -> tuple[str, str]:
    with translation.override(language if language in LANGUAGES else "en"):
        subject = _("Your code for %(clinic)s") % {"clinic": clinic_name}
        body = _("%(code)s is your code to join the waiting list at %(clinic)s. It works for %(minutes)s minutes. "
                 "If you did not ask for it, ignore this message.") % {
            "code": code, "clinic": clinic_name, "minutes": int(CODE_VALID.total_seconds() // 60)}
    return subject, body


def deliver_join_code(message: OutboxMessage) -> str:
    """The outbox handler: a fresh code for the request, sent; skipped when the request is gone or verified."""
    issued = join_request_issue_code(ref=(message.payload or {}).get("request", ""), now=timezone.now())
    if issued is None:
        raise DeliverySkipped("REQUEST_CLOSED")
    request, clinic = issued.request, issued.request.clinic
    subject, body = code_text(clinic.name_in(request.language), issued.code, request.language)
    by_text = request.verify_channel == ContactChannel.SMS
    provider = provider_for(clinic.settings)
    provider.send(Notice(message_ref=message.ref, clinic_ref=clinic.ref, recipient_ref=request.ref,
                         language=request.language, subject=subject, body=body,
                         phone=request.phone if by_text else "", email="" if by_text else request.email))
    if provider.name == "console" and not getattr(settings, "PRODUCTION", False):
        # make run: the demo has no phone to read the code on (production refuses the console provider anyway:
        # common.checks, NOTIFY_ALLOW_CONSOLE_IN_PRODUCTION, and then the code is not logged).
        logger.warning("join code request=%s code=%s (console provider, not production)", request.ref, issued.code)
    return provider.name


def joined_text(patient, entry, link: str) -> tuple[str, str]:
    with translation.override(patient.language if patient.language in LANGUAGES else "en"):
        clinic = patient.clinic.name_in(translation.get_language())
        subject = _("You are on the waiting list of %(clinic)s") % {"clinic": clinic}
        body = _("You are on the waiting list of %(clinic)s for %(treatment)s. We send you a message when a time "
                 "you can come opens up. See or change your place, pause or leave:\n%(link)s\n") % {
            "clinic": clinic, "treatment": entry.treatment.name_in(translation.get_language()), "link": link}
    return subject, body


def deliver_joined(message: OutboxMessage) -> str:
    """The outbox handler of "you are on the list": the status link, by the patient's consented channel, within the
    clinic's quiet hours and contact cap like every patient notice."""
    from common.notify import send_patient_notice
    from scheduling.services.consent import consent_granted, provider_channels
    from waitlist.joining.tokens import status_link
    from waitlist.models import OPEN_ENTRY_STATUSES, WaitlistEntry
    from waitlist.offers.tokens import optout_link
    from waitlist.rules.reachability import send_window
    from waitlist.services import policy_current

    entry = (WaitlistEntry.objects.select_related("patient__clinic", "treatment")
             .filter(ref=(message.payload or {}).get("entry", ""), clinic__ref=message.clinic_ref).first())
    if entry is None or entry.status not in OPEN_ENTRY_STATUSES:
        raise DeliverySkipped("ENTRY_CLOSED")
    patient, clinic = entry.patient, entry.patient.clinic
    if not consent_granted(patient.pk, provider_channels(clinic.settings)):
        raise DeliverySkipped("CONSENT_REVOKED")
    link = status_link(patient)
    subject, body = joined_text(patient, entry, link)
    body += optout_line(optout_link(patient), patient.language)
    return send_patient_notice(message=message, clinic=clinic, patient=patient,
                               window=send_window(policy_current(clinic=clinic), clinic), subject=subject, body=body,
                               link=link, now=timezone.now())
