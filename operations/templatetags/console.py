"""Small display filters for console templates."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

from django import template
from django.utils.dateparse import parse_datetime

register = template.Library()


@register.filter
def compact_json(value, limit: int = 200) -> str:
    """A short, stable one-line rendering of an audit result (codes, refs and counts)."""
    if value in (None, "", {}, []):
        return "—"
    text = json.dumps(value, sort_keys=True, separators=(", ", ": "), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def in_zone(value, tz_name: str) -> str:
    """An ISO 8601 string or aware datetime shown in the clinic's zone: ``2030-12-03 10:02 KST``.

    Selectors hand times over as ISO strings in UTC; the console always shows the clinic's wall clock.
    """
    if value in (None, ""):
        return "—"
    moment = value if isinstance(value, datetime) else parse_datetime(str(value))
    if moment is None:
        return "—"
    return moment.astimezone(ZoneInfo(tz_name)).strftime("%Y-%m-%d %H:%M %Z")


@register.filter
def duration(seconds) -> str:
    """Seconds as a short age: ``45s``, ``12m 5s``, ``3h 20m``, ``2d 4h``; ``—`` when unknown."""
    if seconds in (None, ""):
        return "—"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {sec}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


@register.filter
def percent(ratio) -> str:
    """A 0–1 ratio as ``87.5%``; ``—`` when undefined (no denominator)."""
    if ratio in (None, ""):
        return "—"
    return f"{float(ratio) * 100:.1f}%"


@register.inclusion_tag("operations/partials/ref.html")
def ref(value, keep: int = 12):
    """A ref that fits its column: the first ``keep`` characters, the full ref on hover and a copy button."""
    value = str(value or "")
    short = value if len(value) <= keep + 1 else value[:keep] + "…"
    return {"value": value, "short": short}


@register.filter
def field_label(name: str) -> str:
    """``offer__vacancy__ref`` → ``offer vacancy``: a readable label for a selector's value key."""
    return name.replace("__ref", "").replace("__name", "").replace("__", " ").replace("_", " ")


@register.filter
def priority_band(rank) -> str:
    """The waiting list's priority band from the decision's rank (higher rank is served first)."""
    rank = int(rank or 0)
    return "HIGH" if rank > 0 else "LOW" if rank < 0 else "NORMAL"


@register.filter
def is_preview(action: str) -> bool:
    """A read-only preview's audit action (shown apart from the changes it precedes)."""
    from operations.selectors import PREVIEW_ACTION_SUFFIX

    return str(action).endswith(PREVIEW_ACTION_SUFFIX)


@register.filter
def breakable(code) -> str:
    """A code (UPPER_SNAKE or dotted action) that may wrap after its underscores and dots, never inside a word."""
    from django.utils.html import escape
    from django.utils.safestring import mark_safe

    return mark_safe(escape(str(code)).replace("_", "_<wbr>").replace(".", ".<wbr>"))


@register.filter
def when(value, tz_name: str) -> str:
    """A time in the clinic's zone that wraps only between its date and its clock."""
    from django.utils.html import format_html

    text = in_zone(value, tz_name)
    if " " not in text:
        return text
    day, clock = text.split(" ", 1)
    iso = value.isoformat() if isinstance(value, datetime) else str(value)
    return format_html('<time datetime="{}"><span class="nw">{}</span> <span class="nw">{}</span></time>', iso, day,
                       clock)


@register.filter
def code_label(code) -> str:
    from operations.labels import code_label as label

    return label(code)


@register.inclusion_tag("operations/partials/code.html")
def code(value, kind: str = "", brief: bool = False):
    """A code in plain words with the code itself beside it (wrapping at underscores) and its explanation.

    ``kind`` picks the family's words for a code shared by families (``consent`` for a consent's GRANTED);
    ``brief`` shows the words alone with the code in the tooltip, for runs of many codes (eligibility checks).
    """
    from operations.labels import code_help as help_text
    from operations.labels import code_label as label

    value = str(value or "")
    words = label(value, kind=kind)
    # "Offered" beside OFFERED says nothing new: such a code shows once, its explanation as the tooltip.
    same = words.upper() == value
    context = {"value": value, "label": value if same else words, "help": help_text(value, kind=kind)}
    if brief:  # words alone: the code is only in the tooltip, so "Treatment" stays words even beside TREATMENT
        context.update(brief=True, label=words)
    return context


@register.filter
def coded(text, kind: str = "") -> str:
    """A line built from codes (``OFFERED → ACCEPTED``, ``SMS REVOKED (OPT_OUT_LINK)``) with each code the glossary
    knows in words, the code in its tooltip and ``data-code``; everything else as it is, escaped."""
    import re

    from django.template.loader import render_to_string
    from django.utils.html import escape
    from django.utils.safestring import mark_safe

    from operations.labels import GLOSSARY

    def words(match) -> str:
        value = match.group(0)
        if value not in GLOSSARY and f"{kind}.{value}" not in GLOSSARY:
            return value
        return render_to_string("operations/partials/code.html", code(value, kind, brief=True)).strip()

    return mark_safe(re.sub(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b", words, str(escape(text))))


@register.filter
def is_code(value) -> bool:
    from operations.labels import is_code as known

    return known(value)


@register.filter
def policy_label(name: str) -> str:
    from operations.labels import policy_label as label

    return label(name)


@register.filter
def policy_unit(name: str) -> str:
    from operations.labels import policy_unit as unit

    return unit(name)


@register.filter
def policy_help(name: str) -> str:
    from operations.labels import policy_help as help_text

    return help_text(name)


@register.filter
def result_fields(result, tz_name: str) -> list[tuple[str, str]]:
    """An audit row's result as readable (label, value) pairs: nested keys joined, times in the clinic's zone,
    lists joined by commas."""
    pairs: list[tuple[str, str]] = []

    def text(value) -> str:
        if isinstance(value, str) and len(value) >= 19 and value[4:5] == "-" and value[10:11] == "T":
            try:
                return in_zone(datetime.fromisoformat(value), tz_name)
            except ValueError:
                return value
        if isinstance(value, list):
            return ", ".join(text(v) for v in value) or "—"
        if value is None or value == "":
            return "—"
        return str(value)

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix} {key}".strip(), inner)
        else:
            pairs.append((field_label(prefix), text(value)))

    walk("", result if isinstance(result, dict) else {"result": result})
    return pairs


@register.filter
def short_code(code, clinic) -> str:
    """A row's stored code as a person reads it, with the clinic's prefix: ``GN-7KQ3`` (empty without one)."""
    from common.shortcodes import display_code

    return display_code(clinic, str(code or ""))


@register.filter
def get_item(mapping, key):
    """``mapping[key]`` in a template (None when missing)."""
    return mapping.get(key) if hasattr(mapping, "get") else None
