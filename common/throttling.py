"""DRF throttles that key on the honest client address and fail open when Redis is down.

Each is a fixed-window counter in Redis (INCR, and EXPIRE when the INCR created the key, in one Lua
script run by its SHA: one round trip, a few bytes, no pipeline object built per request; the Redis client is
``common.fastpath.redis_client``), not DRF's
history of timestamps, which is pickled, read and rewritten on every request and grows with the rate
it allows (issue 15: the user throttle was ~8 ms of a claim under load).
The rates (``DEFAULT_THROTTLE_RATES``), the keys (user, else client address) and the answer
(429 ``THROTTLED`` with ``Retry-After``) are DRF's; a window allows ``num_requests`` and then
refuses until it ends, so a burst at a window's edge may see up to twice the rate across two windows.
"""

from __future__ import annotations

import hashlib
import time

from django.core.cache import cache
from redis.exceptions import NoScriptError
from rest_framework import throttling

from .clientaddr import client_address
from .degrade import REDIS_ERRORS, cache_dependency
from .fastpath import redis_client

#: The window's counter: +1, and the key expires with its window (set once, when the INCR created it).
_COUNT_LUA = (
    "local n = redis.call('INCR', KEYS[1]) "
    "if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end "
    "return n"
)
_COUNT_SHA = hashlib.sha1(_COUNT_LUA.encode(), usedforsecurity=False).hexdigest()


def _count(client, key: str, ttl: int) -> int:
    try:
        return int(client.evalsha(_COUNT_SHA, 1, key, ttl))
    except NoScriptError:  # the first call on this Redis (or after SCRIPT FLUSH/restart) loads it
        return int(client.eval(_COUNT_LUA, 1, key, ttl))


class _FixedWindow:
    """``allow_request`` and ``wait`` of a fixed window on ``SimpleRateThrottle``'s rate and key."""

    def get_ident(self, request):
        return client_address(request.META)

    def allow_request(self, request, view):
        if self.rate is None:  # type: ignore[attr-defined]
            return True
        self.key = self.get_cache_key(request, view)  # type: ignore[attr-defined]
        if self.key is None:
            return True
        duration = self.duration  # type: ignore[attr-defined]
        now = time.time()
        window = int(now // duration)
        self.window_ends = (window + 1) * duration - now
        key = cache.make_and_validate_key(f"{self.key}:w{window}")
        try:
            client = redis_client(cache)
            count = _count(client, key, duration + 1)
        except REDIS_ERRORS as exc:
            cache_dependency.failed(exc)
            return True  # a throttle is a courtesy; PostgreSQL-only reads and writes keep working
        cache_dependency.ok()
        return count <= self.num_requests  # type: ignore[attr-defined]

    def wait(self):
        """Seconds until the window ends (DRF's ``Retry-After``)."""
        return max(getattr(self, "window_ends", 1.0), 1.0)


class AnonRateThrottle(_FixedWindow, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_FixedWindow, throttling.UserRateThrottle):
    pass


def _window_count(scope: str, ident: str, duration: int) -> int | None:
    """The fixed-window count for ``scope:ident`` (hashed), or None while Redis is down (fail open)."""
    now = time.time()
    digest = hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    key = cache.make_and_validate_key(f"page-throttle:{scope}:{digest}:w{int(now // duration)}")
    try:
        count = _count(redis_client(cache), key, duration + 1)
    except REDIS_ERRORS as exc:
        cache_dependency.failed(exc)
        return None
    cache_dependency.ok()
    return count


_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _parse_rate(rate: str) -> tuple[int, int]:
    """``"20/min"`` → (20, 60): DRF's rate format (the period's first letter counts)."""
    count, period = rate.split("/")
    return int(count), _PERIODS[period[0]]


def page_throttle(scope: str):
    """Throttle a patient page with a bearer token in its path (``/claim/<token>/``, ``/optout/<token>/``)
    per client address and per token (``PATIENT_PAGE_THROTTLE_RATES``: ``{"address": "60/min", "token":
    "20/min"}``). Every request counts, so guessing tokens from one address is slowed however each guess
    ends (a guess is still a plain 404 until the limit); over either limit the page answers 429 with a
    plain "too many requests" page and ``Retry-After``, before the token is even read."""
    from functools import wraps

    from django.conf import settings
    from django.shortcuts import render

    def decorate(view):
        @wraps(view)
        def throttled(request, *args, **kwargs):
            rates = settings.PATIENT_PAGE_THROTTLE_RATES
            subjects = {"address": client_address(request.META), "token": str(kwargs.get("token", ""))}
            for name, ident in subjects.items():
                rate = rates.get(name)
                if not rate:
                    continue
                limit, duration = _parse_rate(rate)
                count = _window_count(f"{scope}:{name}", ident, duration)
                if count is not None and count > limit:
                    response = render(request, "waitlist/throttled.html", status=429)
                    response["Retry-After"] = str(duration - int(time.time()) % duration)
                    response["Cache-Control"] = "no-store"
                    return response
            return view(request, *args, **kwargs)

        return throttled

    return decorate


def window_over(scope: str, ident: str, rate: str) -> bool:
    """Count one more ``ident`` in ``scope``'s fixed window of ``rate`` (``"10/min"``); True when over it (never
    while Redis is down: fail open, as every throttle here)."""
    if not rate:
        return False
    limit, duration = _parse_rate(rate)
    count = _window_count(scope, ident, duration)
    return count is not None and count > limit


def rate_exceeded(scope: str, ident: str, rate: str | None) -> int | None:
    """Count one request of ``ident`` (hashed) against ``rate`` (``"20/hour"``) in ``scope``'s fixed window: the
    seconds until the window ends when this one is over the limit, else None (also while Redis is down: fail
    open). The public join contract's limits per address, contact and clinic use it."""
    if not rate:
        return None
    limit, duration = _parse_rate(rate)
    count = _window_count(scope, ident, duration)
    if count is None or count <= limit:
        return None
    return max(duration - int(time.time()) % duration, 1)
