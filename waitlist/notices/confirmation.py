"""Delivery of ``waitlist.booking_confirmed`` outbox rows: the patient is told they are booked.

The row carries refs only (``services.confirmation.booking_confirmation_queue``). At send time this
handler loads the appointment and its offer by ref and decides, with the same rules as the offer
notice (``waitlist.notices.offer_notice``):

- the booking no longer stands (appointment not CONFIRMED, its offer not ACCEPTED, or the slot
  started) → ``DeliverySkipped("BOOKING_CLOSED")``: a confirmation of a booking that was cancelled or
  released before the notice went out is not sent, and not counted against the contact cap;
- the waitlist flag off → ``DeliverySkipped("FEATURE_OFF")``; no GRANTED consent on a channel the
  clinic's provider uses → ``DeliverySkipped("CONSENT_REVOKED")``;
- quiet hours or the daily contact cap → ``DeliveryDeferred`` (``common.notify.send_patient_notice``);
- otherwise the notice in the patient's language: date and weekday, start and end in the clinic's
  zone, practitioner, clinic address and phone (clinic settings), the booking's reference, the
  calendar file (attached to email; a signed ``.ics`` link for SMS and webhooks), an optional release
  line (standing acceptance) and the opt-out link.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.utils import formats, timezone, translation
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from common.models import OutboxMessage
from common.notify import check_send_window, provider_for, send_patient_notice
from common.outbox import DeliveryFailed, DeliverySkipped
from common.shortcodes import display_code
from scheduling.models import Appointment, AppointmentStatus
from scheduling.selectors import clinic_contact
from scheduling.services.consent import consent_granted, provider_channels
from scheduling.services.features import feature_enabled
from waitlist.models import Offer, OfferStatus
from waitlist.notices.offer_notice import LANGUAGES, code_line, optout_line, standing_line, status_line, zone_label
from waitlist.offers.calendar import FILENAME, MIME_TYPE, CalendarEvent, ics_render, uid_domain
from waitlist.offers.tokens import calendar_link, optout_link
from waitlist.policy.services import policy_current
from waitlist.rules.reachability import send_window
from waitlist.texts.compose import booked_text
from waitlist.texts.services.send import TextKind, text_channel, text_send


def _local(value: datetime, tz_name: str) -> datetime:
    return timezone.localtime(value, ZoneInfo(tz_name))


def local_day(value: datetime, tz_name: str) -> str:
    """The clinic-local day with its weekday, in the active language ("Tuesday, Dec. 3, 2030")."""
    local = _local(value, tz_name)
    return _("%(weekday)s, %(date)s") % {"weekday": formats.date_format(local, "l"),
                                         "date": formats.date_format(local, "DATE_FORMAT")}


def local_time(value: datetime, tz_name: str) -> str:
    """The clinic-local clock time in the active language's TIME_FORMAT ("10:30 a.m.", "오전 10:30")."""
    return formats.date_format(_local(value, tz_name), "TIME_FORMAT")


def local_moment(value: datetime, tz_name: str) -> str:
    """A moment as the patient reads it: "10:20 a.m. on Tuesday, Dec. 1, 2030" (ko: date first)."""
    return _("%(time)s on %(day)s") % {"time": local_time(value, tz_name), "day": local_day(value, tz_name)}


@dataclass(frozen=True)
class BookingFacts:
    """What a patient is told about their booking, formatted in the active language."""

    clinic: str
    treatment: str
    practitioner: str
    day: str
    start: str
    end: str
    zone: str
    address: str
    phone: str
    reference: str
    #: The short code the patient reads out when they call (``GN-4821``).
    code: str = ""


def shown_name(row) -> str:
    """A clinic's, practitioner's or treatment's name in the active language (``DisplayNamed.name_in``)."""
    return row.name_in(translation.get_language())


def clinic_contact_shown(clinic) -> tuple[str, str]:
    """``(address, phone)`` as patients read them: ``settings.contact.address_<language>`` when the clinic
    gave one (``address_ko``), else its ``address``."""
    address, phone = clinic_contact(clinic)
    contact = (clinic.settings or {}).get("contact")
    if isinstance(contact, dict):
        address = str(contact.get(f"address_{translation.get_language()}") or "").strip() or address
    return address, phone


def slot_facts(clinic, practitioner, treatment, starts_at: datetime, ends_at: datetime,
               reference: str = "", code: str = "") -> BookingFacts:
    """A time at the clinic in the clinic's zone, with names and contact in the active language."""
    address, phone = clinic_contact_shown(clinic)
    tz_name = clinic.timezone
    return BookingFacts(
        clinic=shown_name(clinic), treatment=shown_name(treatment), practitioner=shown_name(practitioner),
        day=local_day(starts_at, tz_name), start=local_time(starts_at, tz_name),
        end=local_time(ends_at, tz_name), zone=zone_label(tz_name), address=address, phone=phone,
        reference=reference, code=code,
    )


def booking_facts(appointment: Appointment) -> BookingFacts:
    """``appointment`` (with clinic, treatment, practitioner) in the clinic's zone and the active language."""
    return slot_facts(appointment.clinic, appointment.practitioner, appointment.treatment, appointment.starts_at,
                      appointment.ends_at, reference=appointment.ref,
                      code=display_code(appointment.clinic, appointment.code))


def booking_ics(appointment: Appointment, language: str) -> str:
    """The booking's calendar file; its summary and description in ``language``."""
    with translation.override(language if language in LANGUAGES else "en"):
        facts = booking_facts(appointment)
        lines = [_("Practitioner: %(value)s") % {"value": facts.practitioner}]
        if facts.phone:
            lines.append(_("Clinic phone: %(value)s") % {"value": facts.phone})
        lines.append(_("Booking reference: %(value)s") % {"value": facts.reference})
        event = CalendarEvent(
            uid=f"{appointment.ref}@{uid_domain()}",
            stamp=appointment.created_at,
            starts_at=appointment.starts_at,
            ends_at=appointment.ends_at,
            summary=_("%(treatment)s at %(clinic)s") % {"treatment": facts.treatment, "clinic": facts.clinic},
            location=", ".join(part for part in (facts.clinic, facts.address) if part),
            description="\n".join(lines),
        )
    return ics_render(event)


@dataclass(frozen=True)
class Release:
    """A booking made automatically (standing acceptance) that the patient may release until ``until``."""

    until: datetime
    link: str


def booking_notice_text(appointment: Appointment, *, language: str, calendar: str,
                        release: Release | None = None) -> tuple[str, str]:
    """(subject, body) in ``language``. ``calendar``: the line's link, or "" when the file is attached."""
    tz_name = appointment.clinic.timezone
    with translation.override(language if language in LANGUAGES else "en"):
        facts = booking_facts(appointment)
        subject = _("Your appointment at %(clinic)s is confirmed") % {"clinic": facts.clinic}
        if release is not None:
            lines = [_("You were booked automatically for a %(treatment)s appointment at %(clinic)s.")
                     % {"treatment": facts.treatment, "clinic": facts.clinic}]
        else:
            lines = [_("Your %(treatment)s appointment at %(clinic)s is confirmed.")
                     % {"treatment": facts.treatment, "clinic": facts.clinic}]
        lines += [
            _("Date: %(value)s") % {"value": facts.day},
            _("Time: %(start)s–%(end)s (%(zone)s)") % {"start": facts.start, "end": facts.end, "zone": facts.zone},
            _("Practitioner: %(value)s") % {"value": facts.practitioner},
        ]
        if facts.address:
            lines.append(_("Address: %(value)s") % {"value": facts.address})
        if facts.phone:
            lines.append(_("Clinic phone: %(value)s") % {"value": facts.phone})
        lines += code_line(facts.code)
        lines.append(_("Booking reference: %(value)s") % {"value": facts.reference})
        if calendar:
            lines.append(_("Add it to your calendar:\n%(link)s") % {"link": calendar})
        else:
            lines.append(_("The calendar file (appointment.ics) is attached."))
        if release is not None:
            lines.append(_("If you cannot come, release the time by %(deadline)s so that someone else can have "
                           "it:\n%(link)s") % {"deadline": local_moment(release.until, tz_name), "link": release.link})
        elif facts.phone:
            lines.append(_("To cancel or change it, please call the clinic: %(phone)s") % {"phone": facts.phone})
        else:
            lines.append(_("If you cannot come, please call the clinic."))
    return subject, "\n".join(lines) + "\n"


#: Builds the release link of a booking made by standing acceptance, at send time:
#: ``builder(offer, appointment) -> absolute URL``. Registered once by the feature that owns releases.
ReleaseLinkBuilder = Callable[[Offer, Appointment], str]
_release_link_builder: ReleaseLinkBuilder | None = None


def release_link_register(builder: ReleaseLinkBuilder | None) -> ReleaseLinkBuilder | None:
    """Install the release-link builder (None removes it) and return the one it replaces. The link is a bearer
    credential, so the outbox stores only ``release_until`` and the link is made here, when the notice goes out.
    The app registers the claim page (``WaitlistConfig.ready``), which offers the release."""
    global _release_link_builder
    previous, _release_link_builder = _release_link_builder, builder
    return previous


def deliver_booking_confirmation(message: OutboxMessage) -> str:
    """The outbox handler for ``waitlist.booking_confirmed``; returns the provider name."""
    now = timezone.now()
    payload = message.payload or {}
    appointment = (
        Appointment.objects.select_related("clinic", "patient", "practitioner", "treatment")
        .filter(ref=payload.get("appointment") or message.aggregate_ref, clinic__ref=message.clinic_ref)
        .first()
    )
    if appointment is None:
        raise DeliverySkipped("BOOKING_MISSING")
    offer = Offer.objects.filter(ref=payload.get("offer", ""), clinic_id=appointment.clinic_id).first()
    if (appointment.status != AppointmentStatus.CONFIRMED or now >= appointment.starts_at
            or (offer is not None and offer.status != OfferStatus.ACCEPTED)):
        raise DeliverySkipped("BOOKING_CLOSED")
    clinic, patient = appointment.clinic, appointment.patient
    if not feature_enabled("waitlist", clinic):
        raise DeliverySkipped("FEATURE_OFF")
    if not consent_granted(patient.pk, provider_channels(clinic.settings)):
        raise DeliverySkipped("CONSENT_REVOKED")
    release = None
    release_until = parse_datetime(payload["release_until"]) if payload.get("release_until") else None
    texter = text_channel(message, clinic, patient) if offer is not None else None
    if texter is not None:  # text first (issue 39); its short link opens the claim page, which shows the booking
        check_send_window(send_window(policy_current(clinic=clinic), clinic),
                          recipient_ref=message.recipient_ref or patient.ref, now=now)
        return text_send(texter, message=message, clinic=clinic, patient=patient, kind=TextKind.BOOKED, offer=offer,
                         now=now, compose=lambda code, link: booked_text(
                             clinic=clinic, language=patient.language, starts_at=appointment.starts_at, code=code,
                             link=link, automatic=release_until is not None))
    if release_until is not None:
        if _release_link_builder is None or offer is None:
            raise DeliveryFailed("NO_RELEASE_LINK")
        release = Release(until=release_until, link=_release_link_builder(offer, appointment))
    link = calendar_link(appointment)
    attached = provider_for(clinic.settings).name == "email"
    subject, body = booking_notice_text(appointment, language=patient.language, calendar="" if attached else link,
                                        release=release)
    if release is not None and offer is not None:  # booked automatically: how to stop that
        body += standing_line(offer.entry, patient.language)
    if offer is not None:  # a booking from the waiting list: the patient's other entries and their place
        body += status_line(patient, patient.language)
    body += optout_line(optout_link(patient), patient.language)
    attachments = ((FILENAME, booking_ics(appointment, patient.language), MIME_TYPE),) if attached else ()
    return send_patient_notice(message=message, clinic=clinic, patient=patient,
                               window=send_window(policy_current(clinic=clinic), clinic), subject=subject,
                               body=body, link=link, attachments=attachments, now=now)
