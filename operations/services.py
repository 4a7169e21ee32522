"""Console writers: the sign-in throttle (cache counters, PostgreSQL when Redis is down).

Domain changes made from console pages go through the owning app's services, never through here.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from common.degrade import REDIS_ERRORS, cache_dependency
from common.models import AuditEntry
from common.services import audit_record
from common.usernames import canonical_username

#: Audit actions of the sign-in throttle. FAILED rows are written only while Redis is down (they
#: are then the counter); THROTTLED once per lockout, naming the scope that locked.
ACTION_FAILED = "auth.sign_in_failed"
ACTION_THROTTLED = "auth.sign_in_throttled"


def _digest(value: str) -> str:
    # Hashed so that user names typed into the form never sit in Redis (or the fallback rows) in the clear.
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def _subjects(*, username: str, ip: str) -> dict[str, tuple[str, int]]:
    """{scope: (digest, limit)}: one counter per user name (any address), one per address (any name)."""
    return {
        "username": (_digest("u|" + canonical_username(username)), settings.CONSOLE_LOGIN_MAX_FAILURES),
        "address": (_digest("a|" + ip), settings.CONSOLE_LOGIN_MAX_FAILURES_PER_ADDRESS),
    }


def _cache_key(digest: str) -> str:
    return f"console:login-failures:{digest}"


def _db_counts(digests: list[str]) -> dict[str, int]:
    since = timezone.now() - timedelta(seconds=settings.CONSOLE_LOGIN_WINDOW_SECONDS)
    rows = AuditEntry.objects.filter(clinic_ref="", action=ACTION_FAILED, created_at__gte=since)
    return {d: rows.filter(result__subjects__contains=[d]).count() for d in digests}


def _counts(digests: list[str]) -> dict[str, int]:
    try:
        found = cache.get_many([_cache_key(d) for d in digests])
    except REDIS_ERRORS as exc:
        cache_dependency.failed(exc)
        return _db_counts(digests)
    cache_dependency.ok()
    return {d: int(found.get(_cache_key(d)) or 0) for d in digests}


def login_throttled_scope(*, username: str, ip: str) -> str | None:
    """``"username"`` or ``"address"`` once that counter reached its limit in the window, else None."""
    subjects = _subjects(username=username, ip=ip)
    counts = _counts([digest for digest, _ in subjects.values()])
    for scope, (digest, limit) in subjects.items():
        if counts[digest] >= limit:
            return scope
    return None


def login_is_throttled(*, username: str, ip: str) -> bool:
    return login_throttled_scope(username=username, ip=ip) is not None


def _incr(digest: str) -> int:
    """The window is fixed: it starts at the first failure (``add`` sets the TTL once); INCR is atomic."""
    key, window = _cache_key(digest), settings.CONSOLE_LOGIN_WINDOW_SECONDS
    cache.add(key, 0, timeout=window)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=window)
        return 1


def login_failure_record(*, username: str, ip: str, site: str = "console") -> None:
    """Count one failed sign-in against the user name and the address; audit a lockout once."""
    subjects = _subjects(username=username, ip=ip)
    try:
        counts = {digest: _incr(digest) for digest, _ in subjects.values()}
        cache_dependency.ok()
    except REDIS_ERRORS as exc:
        cache_dependency.failed(exc)
        digests = [digest for digest, _ in subjects.values()]
        audit_record(
            actor=None, system_label="sign-in", action=ACTION_FAILED, reason=f"failed sign-in ({site})",
            result={"subjects": digests, "site": site},
        )
        counts = _db_counts(digests)
    for scope, (digest, limit) in subjects.items():
        if counts[digest] == limit:
            audit_record(
                actor=None,
                system_label="sign-in",
                action=ACTION_THROTTLED,
                reason=f"{limit} failed sign-ins for this {scope.replace('username', 'user name')} ({site})",
                result={"scope": scope, "username": canonical_username(username), "address": ip, "site": site},
            )


def login_failures_clear(*, username: str, ip: str) -> None:
    """A successful sign-in clears its user name's counter (the address keeps its count)."""
    digest, _ = _subjects(username=username, ip=ip)["username"]
    try:
        cache.delete(_cache_key(digest))
    except REDIS_ERRORS as exc:
        cache_dependency.failed(exc)
