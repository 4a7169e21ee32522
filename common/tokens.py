"""API tokens for ADMIN commands expire and can be revoked (issue 13 part 5).

DRF's Token keeps its ``created`` time; a token older than ``API_ADMIN_TOKEN_MAX_AGE_HOURS`` still
reads and runs STAFF commands but cannot run ADMIN commands. Revoking deletes the token
(``manage.py api_token_revoke``); a new one is made with ``manage.py api_token_revoke --reissue``.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authtoken.models import Token

from .errors import DomainError


class TokenTooOld(DomainError):
    status_code = 401
    code = "TOKEN_EXPIRED"


def admin_token_expired(token: Token) -> bool:
    max_age = timedelta(hours=settings.API_ADMIN_TOKEN_MAX_AGE_HOURS)
    return token.created < timezone.now() - max_age


def require_fresh_admin_token(auth) -> None:
    """Raise TOKEN_EXPIRED when an ADMIN command comes with a token past its ADMIN lifetime.

    ``auth`` is ``request.auth``: None for session requests (the console has its own re-auth gate).
    The token is read again here, not taken from the authentication cache (``common/auth.py``): an
    ADMIN command sees a revocation at once, on every worker.
    """
    if not isinstance(auth, Token):
        return
    created = Token.objects.filter(key=auth.key, user__is_active=True).values_list("created", flat=True).first()
    if created is None:
        raise exceptions.AuthenticationFailed("Invalid token.")
    auth.created = created
    if admin_token_expired(auth):
        raise TokenTooOld(
            "This API token is too old for ADMIN commands. Ask for a new one "
            "(manage.py api_token_revoke --reissue <user>)."
        )


def token_reissue(user) -> Token:
    """Revoke the user's token (if any) and make a new one."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


def token_fresh(user) -> Token:
    """The user's token, reissued if it can no longer run ADMIN commands (used by the demo seed)."""
    token = Token.objects.filter(user=user).first()
    if token is None or admin_token_expired(token):
        return token_reissue(user)
    return token
