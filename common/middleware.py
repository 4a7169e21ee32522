"""Junk requests answered before any view or query runs: NUL bytes in the path, oversized bodies, and
text PostgreSQL cannot store (NUL, lone surrogates) in the query string or a form body (a typed 400). And
whatever the answer, a body the view did not read is drained, so the keep-alive connection stays usable.

PostgreSQL refuses NUL in text (a 500 if it reached a query); a ref can never contain one, so a
path with NUL is simply not found. A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` would otherwise be
Django's generic HTML 400; it gets the API's JSON 413 instead. A view that must account for such a
body itself (the CRM intake writes a quarantine row) sets ``handles_oversized_body = True``.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.http import HttpResponseBadRequest, HttpResponseNotFound, JsonResponse

from .errors import NotFound, PayloadTooLarge, ValidationFailed
from .textguard import MESSAGE, first_unstorable_param

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _error(exc) -> JsonResponse:
    return JsonResponse(exc.as_body(), status=exc.status_code)


def declared_length(request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def body_too_large(request) -> bool:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return limit is not None and declared_length(request) > limit


#: Seconds the drain of an unread body may take before it gives up (gunicorn then closes the connection).
DRAIN_SECONDS = 2.0


def drain_unread_body(request) -> bool:
    """Read and discard what is left of the request body, up to ``DATA_UPLOAD_MAX_MEMORY_SIZE``; False when
    some of it is left on the socket (the connection cannot carry another request).

    A request refused before its body was read (401, 403, 404, 413) leaves the body on the socket. gunicorn's
    threaded worker then drains at most 64 KB after the response and otherwise drops the connection it had just
    announced as keep-alive, so the client's next request on it failed (issue 26). Draining here keeps the
    connection usable; a body over the limit (declared, or a client that stalls past ``DRAIN_SECONDS``) is
    left, and the connection is closed instead (the response says ``Connection: close``).
    """
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    stream = getattr(request, "_stream", None)
    if stream is None:
        return True
    if limit is not None and declared_length(request) > limit:
        return False
    deadline = time.monotonic() + DRAIN_SECONDS
    try:
        while stream.read(65536):
            if time.monotonic() >= deadline:
                return False
    except OSError:  # the client went away: nothing left to keep usable
        return False
    return True


def body_left_unread(request) -> bool:
    """The request's body is (partly) still on the socket after the answer, so the server will end the connection:
    one over the limit or whose drain stalled (``drain_unread_body``), or any chunked one (``Transfer-Encoding``):
    Django reads a body by its ``Content-Length`` only, so a chunked body is never read, and gunicorn dropped the
    connection after answering ``keep-alive`` (issue 43: every error that ends a connection says so)."""
    if request.META.get("HTTP_TRANSFER_ENCODING"):
        return True
    return bool(declared_length(request)) and not drain_unread_body(request)


def honour_connection_close(application):
    """The WSGI application, with a response's ``Connection: close`` carried out by the server.

    PEP 3333 makes ``Connection`` the server's header (wsgiref refuses it from the application): gunicorn
    dropped ours and announced keep-alive, then closed the connection anyway when a refused body was left
    unread, so the client's next request failed (issue 43). The header is taken off here and handed to the
    server: gunicorn's ``start_response`` is a method of its response, whose ``force_close`` makes it say
    ``Connection: close`` and close.
    """

    def wrapped(environ, start_response):
        def start(status, headers, exc_info=None):
            kept = [(name, value) for name, value in headers if name.lower() != "connection"]
            if len(kept) != len(headers):
                force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
                if force_close is not None:
                    force_close()
            return start_response(status, kept, exc_info)

        return application(environ, start)

    return wrapped


class JunkRequestMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path:
            response = _error(NotFound()) if request.path.startswith("/api/") else HttpResponseNotFound(
                "Not found.", content_type="text/plain")
        else:
            response = self.get_response(request)
        if body_left_unread(request):
            response["Connection"] = "close"
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        view_class = getattr(view_func, "cls", None) or getattr(view_func, "view_class", None)
        if body_too_large(request) and not getattr(view_class, "handles_oversized_body", False):
            return _error(PayloadTooLarge(f"The body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."))
        return self._unstorable(request)

    def _unstorable(self, request):
        """A typed 400 when a query or form parameter holds NUL or a surrogate (common/textguard.py)."""
        field = first_unstorable_param(request.GET)
        if field is None and request.content_type in FORM_TYPES and request.method not in ("GET", "HEAD"):
            field = first_unstorable_param(request.POST)
        if field is None:
            return None
        refusal = ValidationFailed("The request is not valid.", fields={field[:100]: [MESSAGE]})
        if request.path.startswith("/api/"):
            return _error(refusal)
        return HttpResponseBadRequest(MESSAGE, content_type="text/plain")
