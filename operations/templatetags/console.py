"""Small display filters for console templates."""

from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def compact_json(value, limit: int = 200) -> str:
    """A short, stable one-line rendering of an audit result (codes, refs and counts)."""
    if value in (None, "", {}, []):
        return "—"
    text = json.dumps(value, sort_keys=True, separators=(", ", ": "), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
