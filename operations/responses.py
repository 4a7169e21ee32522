"""Console page responses: the shared page context, error pages and toasts."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from common.errors import NotFound
from scheduling.models import Clinic

from .nav import clinic_nav, section_url
from .selectors import console_clinics

TOAST_EVENT = "console-toast"


class HtmxHttpRequest(HttpRequest):
    """For type checking only: a request that went through django-htmx's middleware (settings.MIDDLEWARE)."""

    htmx: HtmxDetails


def with_toast(response: HttpResponse, message: str, *, level: str = "info") -> HttpResponse:
    """Ask the page to show a toast: an ``HX-Trigger`` event that ``static/operations/console.js`` renders.

    Merges with any events already in the header, so a view can trigger its own events too.
    """
    events = json.loads(response.headers.get("HX-Trigger") or "{}")
    events[TOAST_EVENT] = {"message": message, "level": level}
    response["HX-Trigger"] = json.dumps(events)
    return response


def clinic_page_context(request: HttpRequest, clinic: Clinic, section: str) -> dict:
    """What ``operations/base.html`` needs around a clinic page: the switcher and the nav slots."""
    return {
        "clinic": clinic,
        "section": section,
        "nav": clinic_nav(clinic.ref, section),
        "switcher": [
            {"ref": c.ref, "name": c.name, "url": section_url(c.ref, section), "current": c.pk == clinic.pk}
            for c in console_clinics(user=request.user)
        ],
    }


def render_clinic_page(
    request: HttpRequest, template: str, clinic: Clinic, section: str, context: dict | None = None, **kwargs
) -> HttpResponse:
    return render(
        request, template, {**clinic_page_context(request, clinic, section), **(context or {})}, **kwargs
    )


def render_detail(
    request: HttpRequest, template: str, clinic: Clinic, section: str, read: Callable[[], dict]
) -> HttpResponse:
    """A detail panel: the ``#detail`` partial for htmx, else the same panel on its own page; the 404
    page when ``read`` (the panel's selector, returning the context) finds nothing in this clinic."""
    try:
        context = read()
    except NotFound:
        return console_error(request, 404)
    if getattr(request, "htmx", False):
        return render(request, f"{template}#detail", {"clinic": clinic, **context})
    return render_clinic_page(request, template, clinic, section, context)


ERROR_TITLES = {
    400: "Bad request",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    429: "Too many attempts",
}


def console_error(request: HttpRequest, status: int, message: str = "") -> HttpResponse:
    """A plain error page; for htmx requests a toast instead (htmx does not swap 4xx bodies).

    A 404 never says why: a missing clinic and another tenant's clinic look exactly alike.
    """
    title = ERROR_TITLES.get(status, "Error")
    message = message or {404: "There is nothing here, or you do not have access to it."}.get(status, title)
    if getattr(request, "htmx", False):
        response = HttpResponse(status=status)
        response["HX-Reswap"] = "none"
        return with_toast(response, message, level="error")
    return render(
        request,
        "operations/error.html",
        {"status": status, "title": title, "message": message},
        status=status,
    )
