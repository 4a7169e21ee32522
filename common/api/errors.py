"""The error format of every API answer: DRF's exceptions and ``common.errors`` as ``{"code", "detail", "fields"?}``."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response

from ..errors import DomainError

logger = logging.getLogger(__name__)

_DRF_CODES = {
    drf.NotAuthenticated: "NOT_AUTHENTICATED",
    drf.AuthenticationFailed: "NOT_AUTHENTICATED",
    drf.PermissionDenied: "PERMISSION_DENIED",
    drf.NotFound: "NOT_FOUND",
    drf.MethodNotAllowed: "METHOD_NOT_ALLOWED",
    drf.NotAcceptable: "NOT_ACCEPTABLE",
    drf.UnsupportedMediaType: "UNSUPPORTED_MEDIA_TYPE",
    drf.Throttled: "THROTTLED",
    drf.ParseError: "VALIDATION_ERROR",
    drf.ValidationError: "VALIDATION_ERROR",
}


def exception_handler(exc, context):
    """Render every refusal as ``{"code", "detail", "fields"?}``."""
    if isinstance(exc, DomainError):
        return Response(exc.as_body(), status=exc.status_code)
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if not isinstance(exc, drf.APIException):
        return None
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "ERROR")
    if isinstance(exc, drf.ValidationError):
        body = {"code": code, "detail": "The request is not valid.", "fields": field_errors(exc.detail)}
    elif isinstance(exc, drf.ParseError):
        body = {"code": code, "detail": "The body is not valid JSON.", "fields": {"body": [str(exc.detail)]}}
    elif isinstance(exc, drf.NotFound):
        body = {"code": code, "detail": "Not found."}
    else:
        body = {"code": code, "detail": str(exc.detail)}
    headers = {}
    if auth_header := getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = auth_header
    if wait := getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(wait))
    return Response(body, status=exc.status_code, headers=headers)


def field_errors(detail) -> dict:
    if isinstance(detail, dict):
        return {str(k): _flatten(v) for k, v in detail.items()}
    return {"non_field_errors": _flatten(detail)}


def _flatten(value):
    if isinstance(value, dict):
        return {str(k): _flatten(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_flatten(v) for v in value]
    return str(value)
