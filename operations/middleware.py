"""Response headers for HTML pages: the content security policy and a tight permissions policy."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"


class ContentSecurityPolicyMiddleware:
    """Set ``Content-Security-Policy`` from ``settings.CONSOLE_CSP`` unless a view already set one.

    The policy forbids inline scripts and styles: pages load ``static/`` files only, and htmx is
    configured through its ``<meta name="htmx-config">`` tag. Paths in ``CONSOLE_CSP_EXEMPT_PATHS``
    (the Swagger UI, which bootstraps with an inline script) are left alone.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        self.policy: str = settings.CONSOLE_CSP
        self.exempt: tuple[str, ...] = tuple(settings.CONSOLE_CSP_EXEMPT_PATHS)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.exempt and request.path.startswith(self.exempt):
            return response
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        response.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response
