"""FHIR R4 search parameters: date prefixes, tokens, references, AND across and OR within (docs/fhir.md).

Parsing only: each parameter becomes a ``Q`` on the source rows, or a typed 400 (``SearchInvalid``),
never a 500. Calendar edges (``9999-12-31T23:59:59-05:00`` is past ``datetime.max`` in UTC) are
refused here, before any arithmetic or query can overflow. The FHIR search grammar lives in interop,
not in ``common``'s parsers: it is FHIR's, not the API's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db.models import Q

from common.bounds import NaiveInstant, parse_instant
from common.errors import ValidationFailed

DATE_PREFIXES = ("eq", "ne", "gt", "lt", "ge", "le", "sa", "eb")
MAX_COUNT = 200
DEFAULT_COUNT = 50
#: Parameters every search accepts that are not filters (``_after`` is our keyset cursor).
RESULT_PARAMETERS = ("_count", "_after", "_format", "_pretty")
MAX_VALUE_LENGTH = 200
MAX_ALTERNATIVES = 50

_DATE = re.compile(r"^(?P<y>\d{4})(-(?P<m>\d{2})(-(?P<d>\d{2})(?P<time>T.+)?)?)?$")


class SearchInvalid(ValidationFailed):
    """A search the server cannot run as asked (a 400 ``invalid`` OperationOutcome)."""

    code = "VALIDATION_ERROR"


class SearchNotSupported(ValidationFailed):
    """A parameter or modifier the server does not support, under ``Prefer: handling=strict`` (or a
    modifier, which the spec says a server must refuse rather than ignore)."""

    code = "NOT_SUPPORTED"


def _bad(name: str, detail: str) -> SearchInvalid:
    return SearchInvalid(f"{name}: {detail}", fields={name: [detail]})


def _range(value: str, name: str, zone: ZoneInfo) -> tuple[datetime, datetime]:
    """The [low, high) instants a FHIR date or dateTime stands for. Partial dates (``2026``, ``2026-12``,
    ``2026-12-01``) are whole periods in the clinic's zone; a time needs an offset."""
    match = _DATE.match(value)
    if match is None:
        raise _bad(name, "not a FHIR date or dateTime (YYYY, YYYY-MM, YYYY-MM-DD or with a time and offset)")
    try:
        year, month, day = int(match["y"]), int(match["m"] or 1), int(match["d"] or 1)
        if match["time"]:
            try:
                low = parse_instant(value).astimezone(UTC)
            except NaiveInstant:
                raise _bad(name, "a time needs an offset (Z or ±hh:mm)") from None
            high = low + (timedelta(microseconds=1) if low.microsecond else timedelta(seconds=1))
        else:
            start = date(year, month, day)
            if match["d"]:
                end = start + timedelta(days=1)
            elif match["m"]:
                end = date(year + (month == 12), month % 12 + 1, 1)
            else:
                end = date(year + 1, 1, 1)
            low = datetime(start.year, start.month, start.day, tzinfo=zone).astimezone(UTC)
            high = datetime(end.year, end.month, end.day, tzinfo=zone).astimezone(UTC)
    except (ValueError, OverflowError):
        raise _bad(name, "outside the calendar this server can represent") from None
    # Keep a margin from the ends of Python's calendar, so nothing later (a window, a cursor) overflows.
    if not 1 < low.year < 9999 or not 1 < high.year < 9999:
        raise _bad(name, "outside the calendar this server can represent")
    return low, high


def date_q(values: list[str], *, name: str, field_name: str, zone: ZoneInfo) -> Q:
    """``[prefix]date`` values: repeated parameters AND, commas OR (R4 "date" search)."""
    query = Q()
    for raw in values:
        alternatives = Q()
        for value in split_values(raw, name):
            prefix = value[:2] if value[:2] in DATE_PREFIXES else "eq"
            low, high = _range(value[2:] if value[:2] in DATE_PREFIXES else value, name, zone)
            f = field_name
            alternatives |= {
                "eq": Q(**{f"{f}__gte": low, f"{f}__lt": high}),
                "ne": ~Q(**{f"{f}__gte": low, f"{f}__lt": high}),
                "gt": Q(**{f"{f}__gte": high}),
                "sa": Q(**{f"{f}__gte": high}),
                "ge": Q(**{f"{f}__gte": low}),
                "lt": Q(**{f"{f}__lt": low}),
                "eb": Q(**{f"{f}__lt": low}),
                "le": Q(**{f"{f}__lt": high}),
            }[prefix]
        query &= alternatives
    return query


def split_values(raw: str, name: str) -> list[str]:
    if len(raw) > MAX_VALUE_LENGTH or "\x00" in raw:
        raise _bad(name, f"a value is at most {MAX_VALUE_LENGTH} characters")
    parts = [part.replace("\\,", ",") for part in re.split(r"(?<!\\),", raw)]
    if not all(parts) or len(parts) > MAX_ALTERNATIVES:
        raise _bad(name, "empty or too many comma-separated values")
    return parts


def token_values(values: list[str], *, name: str, system: str | None = None) -> list[list[str]]:
    """Token codes (``code``, ``system|code``, ``|code``): a list per parameter occurrence (AND) of
    alternatives (OR). A system other than ``system`` matches nothing (kept as the empty code, which no ref is)."""
    groups = []
    for raw in values:
        codes = []
        for value in split_values(raw, name):
            if "|" in value:
                given, _, code = value.partition("|")
                if system is None or (given and given != system):
                    codes.append("")  # no ref is empty: matches nothing
                    continue
                value = code
            if not value:
                raise _bad(name, "a token needs a code")
            codes.append(value)
        groups.append(codes)
    return groups


def reference_ids(values: list[str], *, name: str, types: tuple[str, ...]) -> list[list[tuple[str, str]]]:
    """Reference values (``Type/id`` or ``id``): per occurrence, alternatives of (type or "", id)."""
    groups = []
    for raw in values:
        refs = []
        for value in split_values(raw, name):
            kind, _, ident = value.rpartition("/")
            kind = kind.rsplit("/", 1)[-1]  # an absolute URL keeps only its last Type/id
            if kind and kind not in types:
                raise _bad(name, f"references {', '.join(types)} only")
            if not re.fullmatch(r"[A-Za-z0-9\-.]{1,64}", ident):
                raise _bad(name, "not a FHIR id")
            refs.append((kind, ident))
        groups.append(refs)
    return groups


@dataclass
class Parsed:
    """A search as understood: the filter, the page size and cursor, and what was ignored."""

    where: Q = field(default_factory=Q)
    count: int = DEFAULT_COUNT
    after: str = ""
    used: list[tuple[str, str]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    #: ``_count=0`` (R4: the number of matches only): the search's ``total``, set by the search; else None.
    total: int | None = None

    @property
    def count_only(self) -> bool:
        return self.count == 0


#: A parameter's handler: (its values, the clinic's zone) → a Q on the source rows.
Handler = Callable[[list[str], ZoneInfo], Q]


def parse(params, handlers: dict[str, Handler], *, zone: ZoneInfo, strict: bool) -> Parsed:
    """Run each known parameter's handler and AND the results. Unknown parameters are ignored (and left
    out of the ``self`` link) unless ``strict`` (``Prefer: handling=strict``): then they are a 400.
    A modifier we do not support is always a 400, as R4 requires."""
    parsed = Parsed()
    for key in params:
        values = params.getlist(key)
        name, _, modifier = key.partition(":")
        if name in RESULT_PARAMETERS:
            continue
        handler = handlers.get(f"{name}:{modifier}" if modifier else name)
        if handler is None:
            if modifier and name in handlers:
                raise SearchNotSupported(f"The modifier :{modifier} of {name} is not supported.",
                                         fields={key: ["modifier not supported"]})
            if strict:
                raise SearchNotSupported(f"The search parameter {name} is not supported.",
                                         fields={key: ["not supported"]})
            parsed.ignored.append(key)
            continue
        parsed.where &= handler(values, zone)
        parsed.used += [(key, value) for value in values]
    parsed.count = _count(params.get("_count"))
    parsed.after = params.get("_after", "")
    if len(parsed.after) > MAX_VALUE_LENGTH or "\x00" in parsed.after:
        raise _bad("_after", "not a cursor from a next link")
    return parsed


def _count(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_COUNT
    if not raw.isdigit() or not 0 <= int(raw) <= MAX_COUNT:
        raise _bad("_count", f"between 0 (the total only) and {MAX_COUNT}")
    return int(raw)


def timed_cursor(raw: str) -> tuple[datetime, str]:
    """The (start, ref) keyset cursor of a Slot or Appointment ``next`` link."""
    at, _, ref = raw.partition("|")
    try:
        instant = datetime.fromisoformat(at)
    except ValueError:
        instant = None
    if instant is None or instant.utcoffset() is None or not ref or len(ref) > 40 or "\x00" in ref:
        raise _bad("_after", "not a cursor from a next link")
    return instant, ref


def prefers_strict(prefer: str) -> bool:
    """``Prefer: handling=strict`` (the default is lenient)."""
    parts = {part.strip().lower().replace(" ", "") for part in prefer.split(",") + prefer.split(";")}
    return "handling=strict" in parts
