"""API token authentication with a short in-process cache of token → user (issue 15 part 1).

Every API request otherwise reads its token and user (one statement) before anything else. A worker
keeps what it read for ``API_TOKEN_CACHE_SECONDS`` (0 turns the cache off). Safety:

* a token deleted (``api_token_revoke``) or a user changed or deleted through the ORM in this process
  is dropped at once (signals); other workers stop accepting it within ``API_TOKEN_CACHE_SECONDS``;
* ADMIN commands never rely on the cache: ``require_fresh_admin_token`` re-reads the token;
* each request gets its own copies of the user and token rows (nothing is shared between threads).
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db.models.signals import post_delete, post_save
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from .usernames import user_by_username

_MAX_ENTRIES = 10_000
_lock = threading.Lock()
_cache: dict[str, tuple[float, Any, Token]] = {}  # key -> (good until, user, token)


def token_cache_clear() -> None:
    with _lock:
        _cache.clear()


class CachedTokenAuthentication(TokenAuthentication):
    """DRF's TokenAuthentication (same header, same 401s) with the cache above."""

    def authenticate_credentials(self, key):
        ttl = settings.API_TOKEN_CACHE_SECONDS
        if ttl <= 0:
            return super().authenticate_credentials(key)
        now = time.time()
        hit = _cache.get(key)
        # Good for at most ``ttl`` from now: a clock stepped back cannot stretch an entry's life.
        if hit is not None and 0 < hit[0] - now <= ttl:
            user, token = copy.copy(hit[1]), copy.copy(hit[2])
            token.user = user
            return user, token
        user, token = super().authenticate_credentials(key)  # raises AuthenticationFailed as DRF does
        with _lock:
            if len(_cache) >= _MAX_ENTRIES:
                _cache.clear()
            _cache[key] = (now + ttl, copy.copy(user), copy.copy(token))
        return user, token


def _drop_token(sender, instance, **kwargs):
    with _lock:
        _cache.pop(instance.key, None)


def _drop_user(sender, instance, **kwargs):
    with _lock:
        for key in [k for k, (_until, user, _token) in _cache.items() if user.pk == instance.pk]:
            del _cache[key]


def connect_signals() -> None:
    """Called from ``CommonConfig.ready``."""
    post_delete.connect(_drop_token, sender=Token, dispatch_uid="common.auth.token_deleted")
    post_save.connect(_drop_token, sender=Token, dispatch_uid="common.auth.token_saved")
    user_model = get_user_model()
    post_delete.connect(_drop_user, sender=user_model, dispatch_uid="common.auth.user_deleted")
    post_save.connect(_drop_user, sender=user_model, dispatch_uid="common.auth.user_saved")


class CanonicalUsernameBackend(ModelBackend):
    """Django's ModelBackend, finding the user by the canonical user name (common/usernames.py), so
    the sign-in form, the throttle and re-auth agree on who ``ｏｕｔｓｉｄｅｒ`` is."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None
        user = user_by_username(username)
        if user is None:
            get_user_model()().set_password(password)  # the same cost as a real check (ModelBackend's timing guard)
            return None
        if user.check_password(password) and self.user_can_authenticate(user):
            return user
        return None
