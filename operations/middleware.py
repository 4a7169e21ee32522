"""Response headers for HTML pages: the content security policy, a tight permissions policy, and no-store
on signed-in console pages."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import SESSION_KEY, logout
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control

from .sessions import AUTH_AT, LAST_SEEN, LAST_SEEN_RESOLUTION_SECONDS, mark_authenticated, now_ts

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


class SessionLifetimeMiddleware:
    """Sign out a session idle for ``SESSION_IDLE_MINUTES`` or older than ``SESSION_ABSOLUTE_HOURS``.

    Runs after AuthenticationMiddleware. A session signed in before these clocks existed (or by a
    path that did not start them) starts them on its next request. API token requests carry no
    session user and are untouched.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if SESSION_KEY in request.session and request.user.is_authenticated:
            self._check(request)
        response = self.get_response(request)
        # Signed in during this request (e.g. /admin/login/). Only a session sign-in counts: DRF sets
        # request.user for token requests too, and those must not grow a session.
        if SESSION_KEY in request.session and AUTH_AT not in request.session:
            mark_authenticated(request)
        return response

    @staticmethod
    def _check(request: HttpRequest) -> None:
        session, now = request.session, now_ts()
        auth_at, last_seen = session.get(AUTH_AT), session.get(LAST_SEEN)
        if auth_at is None:
            mark_authenticated(request)
            return
        idle = settings.SESSION_IDLE_MINUTES * 60
        absolute = settings.SESSION_ABSOLUTE_HOURS * 3600
        if now - float(auth_at) > absolute or (last_seen is not None and now - float(last_seen) > idle):
            logout(request)  # flushes the session; the request goes on as anonymous
            return
        if last_seen is None or now - float(last_seen) >= LAST_SEEN_RESOLUTION_SECONDS:
            session[LAST_SEEN] = now


class SignedInNoStoreMiddleware:
    """``Cache-Control: no-store`` (and ``private``) on every console response to a signed-in user, so no
    browser, proxy or back button keeps a page of clinic data after sign-out (OWASP ASVS 8.2.1). Directives
    a view set stay (the lists' ``no-cache``), but nothing is stored: a list poll is then always rendered."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if request.path.startswith("/console/") and user is not None and user.is_authenticated:
            patch_cache_control(response, no_store=True, private=True)
        return response
