"""Claim-page tokens: signed, salted, single-offer, and only as alive as the offer they name.

The token is ``django.core.signing.dumps({"o": offer_ref, "e": entry_ref}, salt="waitlist.claim")``
(HMAC-SHA256 with SECRET_KEY, timestamped). The signature and age are checked here; whether the
offer is still open is checked by the page against the database (the token dies with the offer).
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

from waitlist.models import Offer

SALT = "waitlist.claim"
MAX_TOKEN_CHARS = 400


class TokenInvalid(Exception):
    """Forged, malformed or unknown: the page answers 404."""


class TokenExpired(Exception):
    """Genuine but older than the claim horizon: the page answers 410."""


def signed_fields(token, *, salt: str, max_age: int | None, keys: tuple[str, ...]) -> tuple[str, ...]:
    """The string fields ``keys`` of a genuine token signed with ``salt`` and younger than ``max_age`` seconds
    (None: no age limit); TokenInvalid (forged, malformed, too long, fields missing) or TokenExpired otherwise.
    Every signed link of the patient pages (claim, opt-out, standing, calendar, proposal) reads through it."""
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
        raise TokenInvalid()
    try:
        data = signing.loads(token, salt=salt, max_age=max_age)
    except signing.SignatureExpired as exc:
        raise TokenExpired() from exc
    except (signing.BadSignature, ValueError, TypeError, UnicodeError) as exc:
        raise TokenInvalid() from exc
    if not isinstance(data, dict) or not all(isinstance(data.get(key), str) for key in keys):
        raise TokenInvalid()
    return tuple(data[key] for key in keys)


def claim_token_make(offer: Offer) -> str:
    return signing.dumps({"o": offer.ref, "e": offer.entry.ref}, salt=SALT, compress=False)


def max_age_seconds() -> int:
    # The offer itself expires much sooner (policy hold_minutes); this bounds a leaked link anyway.
    return int(getattr(settings, "WAITLIST_CLAIM_TOKEN_MAX_AGE_MINUTES", 24 * 60)) * 60


def claim_token_read(token) -> tuple[str, str]:
    """``(offer_ref, entry_ref)`` from a genuine, unexpired token; TokenInvalid/TokenExpired otherwise."""
    offer_ref, entry_ref = signed_fields(token, salt=SALT, max_age=max_age_seconds(), keys=("o", "e"))
    return offer_ref, entry_ref


def claim_link(offer: Offer) -> str:
    return f"{settings.PUBLIC_BASE_URL.rstrip('/')}/claim/{claim_token_make(offer)}/"


OPTOUT_SALT = "waitlist.notices.optout"


def optout_token_make(patient) -> str:
    """The opt-out link's token: signed (timestamped), names one patient, does one thing (opt out: its own
    salt), and expires after ``WAITLIST_OPTOUT_TOKEN_MAX_AGE_DAYS``. Every notice mints a fresh one, so a
    patient always holds a working link; rotating ``DJANGO_SECRET_KEY`` (old key in SECRET_KEY_FALLBACKS
    until the horizon passes) retires all of them."""
    return signing.dumps({"p": patient.ref}, salt=OPTOUT_SALT, compress=False)


def optout_max_age_seconds() -> int:
    return int(getattr(settings, "WAITLIST_OPTOUT_TOKEN_MAX_AGE_DAYS", 90)) * 24 * 60 * 60


def optout_token_read(token) -> str:
    """The patient ref of a genuine, unexpired opt-out token; TokenInvalid or TokenExpired otherwise."""
    (patient_ref,) = signed_fields(token, salt=OPTOUT_SALT, max_age=optout_max_age_seconds(), keys=("p",))
    return patient_ref


def optout_link(patient) -> str:
    return f"{settings.PUBLIC_BASE_URL.rstrip('/')}/optout/{optout_token_make(patient)}/"


STANDING_SALT = "waitlist.standing"


def standing_token_make(entry) -> str:
    """The "book me automatically" page's token: signed, names one entry; lives as long as a claim horizon
    allows a notice to be read late (``WAITLIST_STANDING_TOKEN_MAX_AGE_DAYS``)."""
    return signing.dumps({"s": entry.ref}, salt=STANDING_SALT, compress=False)


def standing_token_read(token) -> str:
    """The entry ref of a genuine, unexpired standing-acceptance token; TokenInvalid/TokenExpired otherwise."""
    max_age = int(settings.WAITLIST_STANDING_TOKEN_MAX_AGE_DAYS) * 86400
    (entry_ref,) = signed_fields(token, salt=STANDING_SALT, max_age=max_age, keys=("s",))
    return entry_ref


def standing_link(entry) -> str:
    return f"{settings.PUBLIC_BASE_URL.rstrip('/')}/standing/{standing_token_make(entry)}/"


CALENDAR_SALT = "waitlist.offers.calendar"


def calendar_token_make(appointment) -> str:
    """The calendar link's token: signed, names one appointment, no expiry (the route serves the file only
    while the appointment is CONFIRMED and not over, so the link dies with the booking)."""
    return signing.dumps({"a": appointment.ref}, salt=CALENDAR_SALT, compress=False)


def calendar_token_read(token) -> str:
    """The appointment ref of a genuine calendar token; TokenInvalid otherwise."""
    (appointment_ref,) = signed_fields(token, salt=CALENDAR_SALT, max_age=None, keys=("a",))
    return appointment_ref


def calendar_link(appointment) -> str:
    return f"{settings.PUBLIC_BASE_URL.rstrip('/')}/claim/{calendar_token_make(appointment)}.ics"
