"""The WSGI application: a lean middleware chain for token-authenticated API requests (issue 15).

An API request carrying ``Authorization: Token …`` is decided by the token alone: DRF's token
authentication either accepts it or answers 401 (it never falls through to the session), API views
are CSRF-exempt, they send no messages, render no HTML and read no HTMX headers. For those requests
the session, CSRF, authentication, session-lifetime, message, HTMX, CSP and WhiteNoise middleware
only cost time (a session lookup object, cookie parsing, ``Vary: Cookie``, header patching), so they
run through a second chain built from ``settings.MIDDLEWARE`` without ``API_LEAN_SKIPPED_MIDDLEWARE``.
Everything else keeps the full chain: the console, the admin, the claim page, the API docs and any
API request without a token (session-authenticated API calls keep sessions and CSRF).

Both chains are ordinary Django handlers (``WSGIHandler``): the same request signals (connection
age and health checks), the same exception handling; the correlation id, latency metrics, security
headers, junk-request guard, locale and ``CommonMiddleware`` run in both.
"""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler

from .switch import enabled

API_PREFIX = "/api/"


def is_lean_request(environ: dict) -> bool:
    """An API path with a token (DRF's keyword check: first word of the header, any case)."""
    if not environ.get("PATH_INFO", "").startswith(API_PREFIX):
        return False
    words = environ.get("HTTP_AUTHORIZATION", "").split(None, 1)
    return bool(words) and words[0].lower() == "token"


def lean_middleware() -> list[str]:
    skipped = set(settings.API_LEAN_SKIPPED_MIDDLEWARE)
    return [path for path in settings.MIDDLEWARE if path not in skipped]


class _LeanHandler(WSGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        # Django's own chain builder over the lean list (set for the duration of the build only, at
        # start-up, before any request is served).
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = lean_middleware()
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full


class SplitWSGIHandler(WSGIHandler):
    """``config.wsgi.application``: token API requests through the lean chain, the rest through all of it."""

    def __init__(self) -> None:
        super().__init__()
        self.lean = _LeanHandler()

    def __call__(self, environ, start_response):
        if is_lean_request(environ):
            return self.lean(environ, start_response)
        return super().__call__(environ, start_response)


def get_split_wsgi_application() -> WSGIHandler:
    """``config.wsgi.application``: the split handler, or Django's own with the fast paths off."""
    import django

    django.setup(set_prefix=False)
    return SplitWSGIHandler() if enabled() else WSGIHandler()
