"""The scheduling app's part of the production guard (``common.checks``): data, not settings.

Registered at ``SchedulingConfig.ready()`` (``common.checks.data_check_register``); ``production_findings``
runs it with the settings checks (the ground floor imports no app).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import DatabaseError

from .demo import DEMO_USERS


def demo_users_finding() -> str | None:
    """The demo users (``staff``, ``admin``, ``outsider``) with their published passwords: refused in production."""
    try:
        users = list(get_user_model().objects.filter(username__in=list(DEMO_USERS)))
    except DatabaseError:  # not migrated yet: no users at all
        return None
    if any(user.check_password(DEMO_USERS[user.username][0]) for user in users):
        return "demo users (staff/admin/outsider with the demo passwords) are present"
    return None
