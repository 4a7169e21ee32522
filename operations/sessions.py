"""Session clocks: when the user signed in (or re-entered the password) and when they were last seen.

Kept in the session itself (PostgreSQL), so they need no cache. ``SessionLifetimeMiddleware`` signs
out a session idle for ``SESSION_IDLE_MINUTES`` or older than ``SESSION_ABSOLUTE_HOURS``; the
re-authentication gate for ADMIN commands reads ``auth_age_seconds``.
"""

from __future__ import annotations

from django.utils import timezone

AUTH_AT = "cw_auth_at"
LAST_SEEN = "cw_last_seen"
#: Refresh the idle clock at most this often, so a page of htmx requests is not a write each.
LAST_SEEN_RESOLUTION_SECONDS = 60


def now_ts() -> float:
    return timezone.now().timestamp()


def mark_authenticated(request) -> None:
    """Call right after a sign-in or a re-entered password: the clocks start now."""
    now = now_ts()
    request.session[AUTH_AT] = now
    request.session[LAST_SEEN] = now


def auth_age_seconds(request) -> float | None:
    auth_at = request.session.get(AUTH_AT) if hasattr(request, "session") else None
    return None if auth_at is None else now_ts() - float(auth_at)


def start_session_clock(sender, request, user, **kwargs) -> None:
    """``user_logged_in`` receiver: session bookkeeping only (no domain state)."""
    if request is not None and hasattr(request, "session"):
        mark_authenticated(request)
