"""The actor of a management command: an active user holding the command's role in the clinic.

The role comes from ``scheduling.scoping.COMMAND_ROLES``, the registry the API and the console read too.
"""

from __future__ import annotations

from django.core.management.base import CommandError

from common.errors import DomainError
from common.usernames import user_by_username
from scheduling.models import Clinic, Role
from scheduling.scoping import clinic_for_user, command_role


def command_actor(username: str, clinic_ref: str, *, command: str | None = None):
    """(user, clinic) for ``command`` (no command: a read, ADMIN only); CommandError otherwise.

    An unknown clinic and a clinic the user has no role in give the same answer.
    """
    user = user_by_username(username, active_only=True) if username else None
    if user is None:
        raise CommandError("--actor-username: unknown or inactive user")
    role = command_role(command) if command else Role.ADMIN
    try:
        clinic: Clinic = clinic_for_user(user, clinic_ref, role=role)
    except DomainError as exc:
        who = "an ADMIN" if role == Role.ADMIN else "a member"
        raise CommandError(f"{exc.code}: the user is not {who} of that clinic") from exc
    return user, clinic
