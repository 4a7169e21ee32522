"""Console writers. The console's own state is tiny: the sign-in failure counters in the cache.

Domain changes made from console pages go through the owning app's services, never through here.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache


def _login_failure_key(*, username: str, ip: str) -> str:
    # Hashed so that user names typed into the form never sit in Redis in the clear.
    digest = hashlib.sha256(f"{username.strip().casefold()}|{ip}".encode()).hexdigest()
    return f"console:login-failures:{digest}"


def login_failures_count(*, username: str, ip: str) -> int:
    return int(cache.get(_login_failure_key(username=username, ip=ip)) or 0)


def login_is_throttled(*, username: str, ip: str) -> bool:
    """True once ``CONSOLE_LOGIN_MAX_FAILURES`` failures happened inside the current window."""
    return login_failures_count(username=username, ip=ip) >= settings.CONSOLE_LOGIN_MAX_FAILURES


def login_failure_record(*, username: str, ip: str) -> int:
    """Count one failed sign-in for (username, ip) and return the count in the current window.

    The window is fixed: it starts at the first failure (``cache.add`` sets the TTL once) and
    ``incr`` keeps that TTL, so a steady trickle of guesses cannot extend it forever. Redis's
    INCR is atomic, so concurrent guesses are all counted.
    """
    key = _login_failure_key(username=username, ip=ip)
    cache.add(key, 0, timeout=settings.CONSOLE_LOGIN_WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=settings.CONSOLE_LOGIN_WINDOW_SECONDS)
        return 1


def login_failures_clear(*, username: str, ip: str) -> None:
    cache.delete(_login_failure_key(username=username, ip=ip))
