"""One normalisation of user names, used by sign-in, the sign-in throttle, re-auth and the commands.

Django's sign-in form applies NFKC; the throttle used to key on ``strip().casefold()``, so
``ｏｕｔｓｉｄｅｒ`` (full-width), ``outsideｒ`` and ``𝐨𝐮𝐭𝐬𝐢𝐝𝐞𝐫`` signed in as ``outsider`` with five fresh
guesses each (issue 26). Now every path compares ``canonical_username`` (NFKC, case-folded, NFKC again:
Unicode's NFKC_Casefold closure), sign-in finds the user by it, and a name whose canonical form is taken
cannot be created (a validator on the user name, and a unique index on ``lower(normalize(username, NFKC))``
in PostgreSQL, common migration 0005).
"""

from __future__ import annotations

import re
import unicodedata

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import F, Func
from django.db.models.functions import Lower

#: What PostgreSQL cannot store in text: NUL and lone surrogates (common/textguard.py says why).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
MAX_LENGTH = 150


def canonical_username(value: str) -> str:
    """The comparison form of a user name: NFKC, case-folded, NFKC again, stripped, at most 150 characters."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())
    return folded.strip()[:MAX_LENGTH]


class _Nfkc(Func):
    template = "normalize(%(expressions)s, NFKC)"


def db_canonical(field: str = "username") -> Lower:
    """PostgreSQL's side of the index: ``lower(normalize(username, NFKC))``."""
    return Lower(_Nfkc(F(field)))


def user_by_username(value: str, *, active_only: bool = False):
    """The one user whose canonical name is ``value``'s, or None (the index narrows, Python decides)."""
    if not isinstance(value, str) or _UNSTORABLE.search(value):
        return None
    canonical = canonical_username(value)
    if not canonical:
        return None
    users = get_user_model().objects.alias(canonical_name=db_canonical()).filter(canonical_name=canonical)
    if active_only:
        users = users.filter(is_active=True)
    return next((u for u in users[:5] if canonical_username(u.get_username()) == canonical), None)


def validate_canonical_username(value: str) -> None:
    """A new user name is stored in its canonical form, so look-alikes cannot become distinct users."""
    if _UNSTORABLE.search(value):
        raise ValidationError("A user name cannot contain NUL or unpaired surrogate characters.", code="invalid")
    if value != canonical_username(value):
        raise ValidationError(
            "Use the user name's plain lower-case form: %(canonical)s.",
            code="not_canonical",
            params={"canonical": canonical_username(value)},
        )


def install_username_validator() -> None:
    """Called from ``CommonConfig.ready``: forms, the admin and ``createsuperuser`` run field validators."""
    field = get_user_model()._meta.get_field("username")
    if validate_canonical_username not in field.validators:
        field.validators.append(validate_canonical_username)
