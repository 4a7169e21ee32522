"""Live regions of the console: fragments that poll every ``live_seconds()`` and swap only when changed.

A fragment's ETag is the hash of its rendered body, so "changed" means "a person would see a difference".
A poll sending the ETag it holds gets a 304 (no body); the browser's cache (``private, no-cache``) hands htmx
the stored body, and ``static/operations/console.js`` skips the swap when the ETag equals the one on the
element: no flicker, focus and scroll kept. The page itself renders each fragment's first ETag.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.template.loader import render_to_string
from django.utils.cache import patch_vary_headers


def live_seconds() -> int:
    """The stated refresh interval of every live region (``CONSOLE_LIVE_SECONDS``; the issue asks for at most
    10 s)."""
    return int(settings.CONSOLE_LIVE_SECONDS)


#: The header a live answer carries with the count of what needs a person (the tab title shows it).
ATTENTION_HEADER = "X-Console-Attention"


def body_etag(body: str) -> str:
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'


def render_fragment(request: HttpRequest, template: str, context: dict) -> tuple[str, str]:
    """The fragment's HTML and its ETag (the page embeds both; a poll compares them)."""
    body = render_to_string(template, context, request)
    return body, body_etag(body)


def live_response(request: HttpRequest, template: str, context: dict, *, attention: str | None = None) -> HttpResponse:
    """A poll's answer: 304 while the fragment is what the browser holds, else the fragment and its ETag."""
    body, etag = render_fragment(request, template, context)
    headers = {"ETag": etag}
    if attention is not None:
        headers[ATTENTION_HEADER] = attention
    if request.headers.get("If-None-Match") == etag:
        response: HttpResponse = HttpResponseNotModified(headers=headers)
    else:
        response = HttpResponse(body, headers=headers)
    response["Cache-Control"] = "private, no-cache"
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


def attention_count(queue: dict) -> str:
    """What needs a person, as the queue's first page shows it: ``20+`` when more pages follow."""
    rows = len(queue["rows"])
    return f"{rows}+" if queue.get("next_cursor") else str(rows)
