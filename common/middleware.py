"""Junk requests answered before any view or query runs: NUL bytes in the path, oversized bodies.

PostgreSQL refuses NUL in text (a 500 if it reached a query); a ref can never contain one, so a
path with NUL is simply not found. A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` would otherwise be
Django's generic HTML 400; it gets the API's JSON 413 instead. A view that must account for such a
body itself (the CRM intake writes a quarantine row) sets ``handles_oversized_body = True``.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponseNotFound, JsonResponse

from .errors import NotFound, PayloadTooLarge


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
        if getattr(view_class, "handles_oversized_body", False) or not body_too_large(request):
            return None
        return _error(PayloadTooLarge(f"The body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."))
