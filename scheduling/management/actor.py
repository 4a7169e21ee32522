"""The actor of a management command: an active user holding the command's role in the clinic.

The role comes from ``scheduling.scoping.COMMAND_ROLES``, the registry the API and the console read too.
"""

from __future__ import annotations

from django.core.management.base import CommandError

from common.errors import DomainError
from common.usernames import user_by_username
from scheduling.models import Clinic, Role
from scheduling.scoping import clinic_for_user, command_role, may_run


def command_actor(username: str, clinic_ref: str, *, command: str | None = None):
    """(user, clinic) for ``command`` (no command: a read, ADMIN only); CommandError otherwise.

    An unknown clinic and a clinic the user has no role in give the same answer.
    """
    user = user_by_username(username, active_only=True) if username else None
    if user is None:
        raise CommandError("--actor-username: unknown or inactive user")
    who = "an ADMIN" if command is None or command_role(command) == Role.ADMIN else "a member"
    try:
        # No command: a read of the clinic's operations data, which is an ADMIN's.
        clinic: Clinic = clinic_for_user(user, clinic_ref, role=Role.ADMIN if command is None else Role.STAFF)
    except DomainError as exc:
        raise CommandError(f"{exc.code}: the user is not {who} of that clinic") from exc
    if command is not None and not may_run(user, clinic, command):
        raise CommandError(f"PERMISSION_DENIED: the user is not {who} of that clinic")
    return user, clinic
