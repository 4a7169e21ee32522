"""Junk requests answered before any view or query runs: NUL bytes in the path, oversized bodies, and
text PostgreSQL cannot store (NUL, lone surrogates) in the query string or a form body (a typed 400).

PostgreSQL refuses NUL in text (a 500 if it reached a query); a ref can never contain one, so a
path with NUL is simply not found. A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` would otherwise be
Django's generic HTML 400; it gets the API's JSON 413 instead. A view that must account for such a
body itself (the CRM intake writes a quarantine row) sets ``handles_oversized_body = True``.
"""

from __future__ import annotations

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


class JunkRequestMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path:
            if request.path.startswith("/api/"):
                return _error(NotFound())
            return HttpResponseNotFound("Not found.", content_type="text/plain")
        return self.get_response(request)

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
