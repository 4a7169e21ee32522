"""Phone numbers in E.164: the one form they are stored, compared and sent in.

A number is read for the clinic's country (``Clinic.country``, else the country of its time zone), so staff
and patients may type it the local way (``010-5551-2345`` in Seoul); a number written with ``+`` and its
country code is read as such wherever the clinic is.
"""

from __future__ import annotations

import functools
from importlib import resources

import phonenumbers

from common.errors import PhoneInvalid

__all__ = ["country_for_timezone", "normalize_phone", "clinic_region"]


@functools.cache
def _zone_countries() -> dict[str, str]:
    """IANA zone → ISO 3166 alpha-2, from the tz database's ``zone.tab`` (the ``tzdata`` package)."""
    table: dict[str, str] = {}
    text = resources.files("tzdata.zoneinfo").joinpath("zone.tab").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line and not line.startswith("#"):
            parts = line.split("\t")
            if len(parts) >= 3:
                table[parts[2]] = parts[0]
    return table


def country_for_timezone(tz_name: str) -> str:
    """The country a time zone belongs to (``Asia/Seoul`` → ``KR``); "" for zones of no country (UTC)."""
    return _zone_countries().get(tz_name or "", "")


def clinic_region(clinic) -> str:
    """The region numbers of ``clinic`` are read in: its ``country``, else its time zone's."""
    return (getattr(clinic, "country", "") or country_for_timezone(getattr(clinic, "timezone", ""))).upper()


def normalize_phone(raw: str, clinic) -> str:
    """``raw`` in E.164 (``+821055512345``), read for ``clinic``'s country; ``PhoneInvalid`` (400
    ``PHONE_INVALID``, ``fields.phone``) when it is not a valid number there. Blank stays blank."""
    text = (raw or "").strip()
    if not text:
        return ""
    region = clinic_region(clinic) or None
    try:
        number = phonenumbers.parse(text, region)
    except phonenumbers.NumberParseException:
        number = None
    if number is None or not phonenumbers.is_valid_number(number):
        where = region or "an international"
        raise PhoneInvalid("Not a valid phone number for the clinic's country.",
                           fields={"phone": [f"Not a valid number for {where} (use +<country code>…)."]})
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
