"""The words of a text, fitted to one or two segments, in English or Korean.

A segment is 160 GSM-7 characters (153 each when concatenated; the extension table's characters count two),
or 70 UCS-2 characters (67 concatenated) as soon as one character is outside GSM-7, which every Korean text
is. A text over two segments costs three and arrives in pieces on some phones: the clinic's name is shortened
until it fits.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from django.utils import translation
from django.utils.translation import gettext as _

from scheduling.selectors import clinic_contact

LANGUAGES = ("en", "ko")
MAX_SEGMENTS = 2

_GSM_BASIC = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿"
    "abcdefghijklmnopqrstuvwxyzäöñüà"
)
_GSM_EXTENDED = set("^{}\\[~]|€\f")
_EN_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_EN_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_KO_WEEKDAYS = "월화수목금토일"


def segments(text: str) -> int:
    """How many SMS segments ``text`` takes (GSM-7 when every character is in it, else UCS-2)."""
    if all(c in _GSM_BASIC or c in _GSM_EXTENDED for c in text):
        units = sum(2 if c in _GSM_EXTENDED else 1 for c in text)
        single, multi = 160, 153
    else:
        units = sum(2 if ord(c) > 0xFFFF else 1 for c in text)  # UTF-16 code units
        single, multi = 70, 67
    return 1 if units <= single else -(-units // multi)


def when(value: datetime, tz_name: str, language: str) -> str:
    """Weekday, date and time in the clinic's zone, short: ``Thu 5 Dec 14:30``, ``12월 5일(목) 14:30``."""
    local = value.astimezone(ZoneInfo(tz_name))
    if language == "ko":
        return f"{local.month}월 {local.day}일({_KO_WEEKDAYS[local.weekday()]}) {local:%H:%M}"
    return f"{_EN_WEEKDAYS[local.weekday()]} {local.day} {_EN_MONTHS[local.month - 1]} {local:%H:%M}"


def deadline(value: datetime, starts_at: datetime, tz_name: str, language: str) -> str:
    """The answer deadline: its time alone when it falls on the slot's day, else with its date."""
    zone = ZoneInfo(tz_name)
    if value.astimezone(zone).date() == starts_at.astimezone(zone).date():
        return f"{value.astimezone(zone):%H:%M}"
    return when(value, tz_name, language)


def _fit(build, clinic_name: str) -> str:
    """``build(name)`` with the clinic's name shortened (to 8 characters at the least) until it fits two segments."""
    name, text = clinic_name, build(clinic_name)
    while segments(text) > MAX_SEGMENTS and len(name) > 8:
        name = name[: max(8, len(name) - 5)]
        text = build(name + "…")
    return text


def _language(language: str) -> str:
    return language if language in LANGUAGES else "en"


def offer_text(*, clinic, language: str, starts_at: datetime, expires_at: datetime, code: str, link: str,
               status_link: str = "") -> str:
    """A time opened up: when, until when to answer, the reply words with the code, the short link; and the
    patient's status link when the text still fits two segments with it (a signed link is long: in Korean, or with
    a long clinic name, it is left out and the claim page the short link opens is the way there)."""
    language = _language(language)
    with translation.override(language):
        def build(name: str) -> str:
            return _("%(clinic)s: a time is free for you %(when)s. Reply YES %(code)s to take it or NO %(code)s "
                     "by %(deadline)s. %(link)s") % {
                "clinic": name, "when": when(starts_at, clinic.timezone, language), "code": code,
                "deadline": deadline(expires_at, starts_at, clinic.timezone, language), "link": link}

        text = _fit(build, clinic.name_in(language))
        if status_link:
            with_status = text + " " + _("Your place: %(link)s") % {"link": status_link}
            if segments(with_status) <= MAX_SEGMENTS:
                return with_status
        return text


def booked_text(*, clinic, language: str, starts_at: datetime, code: str, link: str, automatic: bool) -> str:
    """You are booked: when, and (booked automatically) the ask to acknowledge it."""
    language = _language(language)
    with translation.override(language):
        def build(name: str) -> str:
            values = {"clinic": name, "when": when(starts_at, clinic.timezone, language), "code": code, "link": link}
            if automatic:
                return _("%(clinic)s: we booked you for %(when)s. Reply YES %(code)s to keep it. %(link)s") % values
            return _("%(clinic)s: you are booked for %(when)s. Details: %(link)s") % values

        return _fit(build, clinic.name_in(language))


def booked_answer(*, clinic, language: str, starts_at: datetime) -> str:
    """The answer to a YES that booked (or had booked): date, time and place."""
    language = _language(language)
    address, _phone = clinic_contact(clinic)
    with translation.override(language):
        return _("%(clinic)s: you are booked for %(when)s at %(place)s.") % {
            "clinic": clinic.name_in(language), "when": when(starts_at, clinic.timezone, language),
            "place": address or clinic.name_in(language)}


def held_answer(*, clinic, language: str, starts_at: datetime) -> str:
    language = _language(language)
    with translation.override(language):
        return _("%(clinic)s: %(when)s is held for you; the clinic will confirm the booking.") % {
            "clinic": clinic.name_in(language), "when": when(starts_at, clinic.timezone, language)}


def declined_answer(*, clinic, language: str) -> str:
    language = _language(language)
    with translation.override(language):
        return _("%(clinic)s: thank you, you stay on the waiting list.") % {"clinic": clinic.name_in(language)}


def gone_answer(*, clinic, language: str) -> str:
    language = _language(language)
    with translation.override(language):
        return _("%(clinic)s: sorry, this offer has ended.") % {"clinic": clinic.name_in(language)}


def refused_answer(*, clinic, language: str) -> str:
    language = _language(language)
    with translation.override(language):
        return _("%(clinic)s: sorry, this time could not be booked.") % {"clinic": clinic.name_in(language)}


def release_closed_answer(*, clinic, language: str) -> str:
    """NO to an automatic booking past its release deadline: it stands; the clinic can still move it."""
    language = _language(language)
    _address, phone = clinic_contact(clinic)
    with translation.override(language):
        return _("%(clinic)s: this booking can no longer be released by text; please call %(phone)s.") % {
            "clinic": clinic.name_in(language), "phone": phone or clinic.name_in(language)}


def which_one_answer(language: str) -> str:
    with translation.override(_language(language)):
        return _("Which offer do you mean? Reply YES or NO with the 4-digit code from our text, e.g. YES 1234.")


def unknown_sender_answer() -> str:
    with translation.override("en"):
        return _("We could not find an offer for this number.")


def stopped_answer(language: str) -> str:
    with translation.override(_language(language)):
        return _("You will get no more texts from us. Reply START to get them again.")


def started_answer(language: str) -> str:
    with translation.override(_language(language)):
        return _("You will get our texts again. Reply STOP to stop them.")


def help_answer(*, clinic, language: str) -> str:
    language = _language(language)
    _address, phone = clinic_contact(clinic)
    with translation.override(language):
        return _("%(clinic)s %(phone)s. Reply STOP to stop texts.") % {
            "clinic": clinic.name_in(language), "phone": phone}
