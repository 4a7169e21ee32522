"""DRF throttles that key on the honest client address and fail open when Redis is down."""

from __future__ import annotations

from rest_framework import throttling

from .clientaddr import client_address
from .degrade import REDIS_ERRORS, cache_dependency


class _Degradable:
    def get_ident(self, request):
        return client_address(request.META)

    def allow_request(self, request, view):
        try:
            allowed = super().allow_request(request, view)  # type: ignore[misc]  # a mixin before a DRF throttle
        except REDIS_ERRORS as exc:
            cache_dependency.failed(exc)
            return True  # a throttle is a courtesy; PostgreSQL-only reads and writes keep working
        if getattr(self, "key", None) is not None:  # the cache was really asked
            cache_dependency.ok()
        return allowed


class AnonRateThrottle(_Degradable, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_Degradable, throttling.UserRateThrottle):
    pass
