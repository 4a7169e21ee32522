"""Phone numbers as the clinic's patients write them, stored as E.164 (``phonenumbers``, Google's libphonenumber).

A number without a country code is read in the clinic's region: the clinic has no country field, so the region
is the country of its IANA time zone (the tz database's ``zone.tab``; ``Asia/Seoul`` → KR). ``normalize_phone``
is the one entry point (the SMS issue's API, so its provider and the join request agree on one form).
"""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

import phonenumbers

from common.errors import ValidationFailed


class PhoneInvalid(ValidationFailed):
    code = "PHONE_INVALID"


def _zone_tab() -> str:
    try:
        return importlib.resources.files("tzdata.zoneinfo").joinpath("zone.tab").read_text()
    except (ModuleNotFoundError, FileNotFoundError):
        return Path("/usr/share/zoneinfo/zone.tab").read_text()


@functools.cache
def _regions() -> dict[str, str]:
    """IANA zone → ISO 3166 country code, from the tz database's ``zone.tab``."""
    regions: dict[str, str] = {}
    for line in _zone_tab().splitlines():
        if line and not line.startswith("#"):
            fields = line.split("\t")
            if len(fields) >= 3:
                regions[fields[2]] = fields[0]
    return regions


def clinic_region(clinic) -> str | None:
    """The region a local number is read in: ``settings.contact.country`` if the clinic gave one, else its zone's."""
    contact = (getattr(clinic, "settings", None) or {}).get("contact") or {}
    country = contact.get("country") if isinstance(contact, dict) else None
    if isinstance(country, str) and len(country) == 2:
        return country.upper()
    return _regions().get(getattr(clinic, "timezone", "") or "")


def normalize_phone(raw: str, clinic) -> str:
    """``raw`` as E.164 (``+821012345678``); ``PhoneInvalid`` (400 ``PHONE_INVALID``) when it is not a valid
    number (in the clinic's region when it has no country code)."""
    text = (raw or "").strip()
    if not text or len(text) > 40:
        raise PhoneInvalid("Give a valid phone number.", fields={"phone": ["Not a valid phone number."]})
    try:
        number = phonenumbers.parse(text, None if text.startswith("+") else clinic_region(clinic))
    except phonenumbers.NumberParseException:
        raise PhoneInvalid("Give a valid phone number.", fields={"phone": ["Not a valid phone number."]}) from None
    if not phonenumbers.is_valid_number(number):
        raise PhoneInvalid("Give a valid phone number.", fields={"phone": ["Not a valid phone number."]})
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
