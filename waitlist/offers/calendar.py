"""The calendar file (RFC 5545 iCalendar) of a booking: one VEVENT, times in UTC, the same UID every time.

Written by hand rather than with a library: the file is one event, and the rules that matter are few
(CRLF line ends, TEXT escaping, folding at 75 octets without splitting a UTF-8 character). The UID is
the appointment's ref, so a patient who imports the file twice (from the email and from the link)
gets one event, and DTSTAMP is the booking's creation time, so the bytes never change for a booking.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from django.conf import settings

MIME_TYPE = "text/calendar"
FILENAME = "appointment.ics"


@dataclass(frozen=True)
class CalendarEvent:
    uid: str
    stamp: datetime
    starts_at: datetime
    ends_at: datetime
    summary: str
    location: str
    description: str


def utc_stamp(value: datetime) -> str:
    """RFC 5545 form 2 (UTC): ``20301203T010000Z``."""
    return value.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def escape_text(value: str) -> str:
    """A TEXT value (RFC 5545 3.3.11): backslash, semicolon, comma and newlines escaped."""
    value = value.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,")
    return value.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


def fold(line: str) -> str:
    """Fold a content line at 75 octets (RFC 5545 3.1): CRLF then one space, never inside a character."""
    parts: list[str] = []
    current, size, limit = "", 0, 75
    for char in line:
        width = len(char.encode())
        if size + width > limit:
            parts.append(current)
            current, size, limit = "", 0, 74  # the leading space of a continuation line is one octet
        current += char
        size += width
    parts.append(current)
    return "\r\n ".join(parts)


def uid_domain() -> str:
    return urlsplit(settings.PUBLIC_BASE_URL).hostname or "clinic-waitlist.invalid"


def ics_render(event: CalendarEvent) -> str:
    """The whole file, CRLF line ends, ending with CRLF."""
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//clinic-waitlist//booking confirmation//EN",
        "CALSCALE:GREGORIAN",
        "METHOD:PUBLISH",
        "BEGIN:VEVENT",
        f"UID:{event.uid}",
        f"DTSTAMP:{utc_stamp(event.stamp)}",
        f"DTSTART:{utc_stamp(event.starts_at)}",
        f"DTEND:{utc_stamp(event.ends_at)}",
        f"SUMMARY:{escape_text(event.summary)}",
        f"LOCATION:{escape_text(event.location)}",
        f"DESCRIPTION:{escape_text(event.description)}",
        "STATUS:CONFIRMED",
        "SEQUENCE:0",
        "TRANSP:OPAQUE",
        "END:VEVENT",
        "END:VCALENDAR",
    ]
    return "".join(fold(line) + "\r\n" for line in lines)
