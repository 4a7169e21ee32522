"""Delivery of ``waitlist.offer_made`` outbox rows: the handler registered in ``WaitlistConfig.ready``.

The outbox row carries refs only (offer, entry, patient, template, language, channel). At send time
this handler loads the offer, its patient and clinic by ref, decides whether a notice is still
wanted, renders it in the patient's language with the claim link and hands it to the clinic's
provider. It never changes an offer, a hold or a claim, and never logs a contact.

Outcomes (``common.outbox``):
- sent → the provider's name is recorded on the attempt;
- offer no longer OFFERED (or its slot has started) → ``DeliverySkipped("OFFER_CLOSED")``: finished,
  not retried, not counted against the patient's contact cap;
- no GRANTED contact consent on a channel the clinic's provider uses (the patient opted out, or never
  consented) → ``DeliverySkipped("CONSENT_REVOKED")``: nothing is sent on a revoked channel;
- waitlist flag off for the clinic → ``DeliverySkipped("FEATURE_OFF")``: "no new notification" means
  the row is finished without a send (re-enabling does not replay old notices; the offer expires
  and the cascade makes fresh ones);
- quiet hours or the per-patient daily cap (the clinic's policy) → ``DeliveryDeferred`` (no attempt
  spent); dispatch already offers only to reachable patients, so this is the rare edge (an offer made
  just before quiet hours began); the offer does not expire while its notice waits;
- sent → ``offer_notice_delivered``: the answer window counts from now (extended when late, never
  past the slot's start);
- a provider failure → ``DeliveryFailed(code)``: retried with backoff, DEAD at the bound. The offer
  stays OFFERED and claimable; its own expiry still cascades.
"""

from __future__ import annotations

import logging
from zoneinfo import ZoneInfo

from django.db.models import OuterRef, Subquery
from django.utils import formats, timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy

from common.errors import DomainError
from common.fastpath import PreparedQuery
from common.models import OutboxMessage
from common.notify import Notice, check_send_window, provider_for
from common.outbox import DeliverySkipped
from common.shortcodes import display_code
from scheduling.services.consent import consent_granted, provider_channels
from scheduling.services.features import feature_enabled
from waitlist.joining.tokens import status_link
from waitlist.models import Offer, OfferStatus, WaitlistPolicy
from waitlist.offers.offers import deadline_if_delivered, offer_notice_delivered
from waitlist.offers.tokens import claim_link, optout_link, standing_link
from waitlist.policy.services import newest_policies, policy_current
from waitlist.rules.reachability import send_window
from waitlist.texts.compose import offer_text
from waitlist.texts.services.send import TextKind, text_channel, text_send

logger = logging.getLogger("waitlist")
LANGUAGES = ("en", "ko")


def local_datetime(value, tz_name: str) -> str:
    """``value`` in the clinic's zone, in the active language's DATETIME_FORMAT."""
    return formats.date_format(timezone.localtime(value, ZoneInfo(tz_name)), "DATETIME_FORMAT")


#: City names of the clinics' zones, translated (the page says "Seoul time", not "Asia/Seoul").
ZONE_CITIES = {
    "Asia/Seoul": _lazy("Seoul"),
    "Europe/Lisbon": _lazy("Lisbon"),
    "Asia/Tokyo": _lazy("Tokyo"),
    "Europe/London": _lazy("London"),
    "America/New_York": _lazy("New York"),
    "UTC": _lazy("UTC"),
}


def zone_label(tz_name: str) -> str:
    """``Asia/Seoul`` → "Seoul time" (ko: "서울 시간"); an unlisted zone shows its city part."""
    city = ZONE_CITIES.get(tz_name) or tz_name.rsplit("/", 1)[-1].replace("_", " ")
    return _("%(city)s time") % {"city": city}


def offer_notice_text(offer: Offer, link: str, language: str) -> tuple[str, str]:
    """(subject, body) in ``language``: clinic, treatment and practitioner by their names in that language,
    the slot's day, start and end in the clinic's zone, and the answer deadline. Values end lines rather than
    sentences, so a time such as "10 a.m." never meets a second full stop."""
    from waitlist.notices.confirmation import slot_facts

    clinic, vacancy = offer.clinic, offer.vacancy
    with translation.override(language if language in LANGUAGES else "en"):
        facts = slot_facts(clinic, vacancy.practitioner, vacancy.treatment, vacancy.starts_at, vacancy.ends_at)
        subject = _("A time opened up at %(clinic)s") % {"clinic": facts.clinic}
        lines = [
            _("A %(treatment)s appointment at %(clinic)s is available for you.")
            % {"treatment": facts.treatment, "clinic": facts.clinic},
            _("Date: %(value)s") % {"value": facts.day},
            _("Time: %(start)s–%(end)s (%(zone)s)") % {"start": facts.start, "end": facts.end, "zone": facts.zone},
            _("Practitioner: %(value)s") % {"value": facts.practitioner},
            *code_line(display_code(clinic, offer.code)),
            _("It is held for you until %(until)s (%(zone)s).")
            % {"until": local_datetime(offer.expires_at, clinic.timezone), "zone": facts.zone},
            _("Open this link to accept or decline:\n%(link)s") % {"link": link},
        ]
    return subject, "\n".join(lines) + "\n"


def code_line(code: str) -> list[str]:
    """The short code the patient can read out when they call (none for a row without one); in the active
    language."""
    return [_("Code to give the clinic: %(value)s") % {"value": code}] if code else []


def standing_line(entry, language: str) -> str:
    """The line of every waitlist notice that lets the patient choose automatic booking, or stop it."""
    with translation.override(language if language in LANGUAGES else "en"):
        return "\n" + _("To have times booked for you automatically, or to stop that, open:\n%(link)s\n") % {
            "link": standing_link(entry)}


def status_line(patient, language: str) -> str:
    """The line of every waitlist notice that opens the patient's own status page (their place, when they can
    come, pause or leave): a fresh signed link each time (``waitlist.joining.tokens``)."""
    with translation.override(language if language in LANGUAGES else "en"):
        return "\n" + _("To see your place on the waiting list or change when you can come, open:\n%(link)s\n") % {
            "link": status_link(patient)}


def optout_line(link: str, language: str) -> str:
    """The line every notice ends with: how to stop these messages, without signing in."""
    with translation.override(language if language in LANGUAGES else "en"):
        return "\n" + _("To stop waiting-list messages, open:\n%(link)s\n") % {"link": link}


#: The offer with everything its notice says, by (clinic ref, offer ref): compiled once per process (a
#: seven-table read on every notice). ``newest_policy_id``: the clinic's current policy, which is the offer's own
#: unless a new version was published since (then read: ``send_window_policy``).
_NOTICE_OFFER: PreparedQuery[Offer] = PreparedQuery(
    lambda clinic_ref, ref: Offer.objects.select_related(
        "clinic", "patient", "entry", "policy", "vacancy__treatment", "vacancy__practitioner"
    ).annotate(newest_policy_id=Subquery(newest_policies(OuterRef("clinic_id")).values("pk")[:1]))
    .filter(ref=ref, clinic__ref=clinic_ref).order_by("pk")[:1],
    str,
    str,
)


def send_window_policy(offer: Offer) -> WaitlistPolicy:
    """The clinic's current policy (its quiet hours and contact cap apply at send time), from ``_NOTICE_OFFER``'s
    read: the offer's own when that is still the newest version."""
    if offer.policy_id is not None and offer.newest_policy_id == offer.policy_id:  # type: ignore[attr-defined]
        return offer.policy
    return policy_current(clinic=offer.clinic)


def deliver_offer_notice(message: OutboxMessage) -> str:
    """The outbox handler for ``waitlist.offer_made``; returns the provider name."""
    now = timezone.now()
    offer_ref = (message.payload or {}).get("offer") or message.aggregate_ref
    offer = _NOTICE_OFFER.first(message.clinic_ref, offer_ref) if isinstance(offer_ref, str) else None
    if offer is None:
        raise DeliverySkipped("OFFER_MISSING")
    # Past expires_at but still OFFERED means the window waited for this notice (it counts from delivery).
    if offer.status != OfferStatus.OFFERED or now >= offer.vacancy.starts_at:
        raise DeliverySkipped("OFFER_CLOSED")
    clinic, patient = offer.clinic, offer.patient
    if not feature_enabled("waitlist", clinic):
        raise DeliverySkipped("FEATURE_OFF")
    if not consent_granted(patient.pk, provider_channels(clinic.settings)):
        raise DeliverySkipped("CONSENT_REVOKED")
    check_send_window(
        send_window(send_window_policy(offer), clinic),
        recipient_ref=message.recipient_ref or patient.ref,
        now=now,
    )
    # The notice states the deadline its delivery sets (the window counts from now).
    offer.expires_at = deadline_if_delivered(offer, starts_at=offer.vacancy.starts_at, tz_name=clinic.timezone,
                                             delivered_at=now)
    texter = text_channel(message, clinic, patient)
    if texter is not None:  # text first (issue 39): a short text with a reply code and a short link
        expires_at = offer.expires_at
        provider_name = text_send(
            texter, message=message, clinic=clinic, patient=patient, kind=TextKind.OFFER, offer=offer, now=now,
            compose=lambda code, link: offer_text(clinic=clinic, language=patient.language,
                                                  starts_at=offer.vacancy.starts_at, expires_at=expires_at,
                                                  code=code, link=link, status_link=status_link(patient)))
    else:
        link = claim_link(offer)
        subject, body = offer_notice_text(offer, link, patient.language)
        if offer.policy.standing_acceptance:
            body += standing_line(offer.entry, patient.language)
        body += status_line(patient, patient.language)
        body += optout_line(optout_link(patient), patient.language)
        provider = provider_for(clinic.settings)
        # The contact is read here, at send time, and goes only to the provider (never to a log).
        provider.send(
            Notice(
                message_ref=message.ref,
                clinic_ref=clinic.ref,
                recipient_ref=patient.ref,
                language=patient.language,
                subject=subject,
                body=body,
                email=patient.email,
                phone=patient.phone,
                link=link,
            )
        )
        provider_name = provider.name
    try:
        offer_notice_delivered(
            clinic=clinic, offer_ref=offer.ref, delivered_at=now, correlation_id=message.correlation_id,
            deadline=offer.expires_at, offer=offer,
        )
    except DomainError as exc:  # the notice went out; a failed bookkeeping step must not resend it
        logger.warning("offer %s: delivery not recorded: %s", offer.ref, exc.code)
    return provider_name
