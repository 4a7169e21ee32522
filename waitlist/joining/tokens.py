"""The patient's status link: ``/join/status/<token>/``, signed (salt of its own), naming one patient.

It opens that patient's entries at their clinic (and edits them), so it is a bearer credential like the opt-out
link: logs show only its digest (``/join/status/`` is among ``common.redaction``'s paths), every notice mints a
fresh one, and it expires after ``WAITLIST_STATUS_TOKEN_MAX_AGE_DAYS`` (default 90).
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

from waitlist.offers.tokens import signed_fields

SALT = "waitlist.joining.status"


def status_token_make(patient) -> str:
    return signing.dumps({"p": patient.ref}, salt=SALT, compress=False)


def status_token_read(token) -> str:
    """The patient ref of a genuine, unexpired token; ``TokenInvalid``/``TokenExpired`` otherwise."""
    max_age = int(getattr(settings, "WAITLIST_STATUS_TOKEN_MAX_AGE_DAYS", 90)) * 24 * 60 * 60
    (patient_ref,) = signed_fields(token, salt=SALT, max_age=max_age, keys=("p",))
    return patient_ref


def status_path(patient) -> str:
    return f"/join/status/{status_token_make(patient)}/"


def status_link(patient) -> str:
    return f"{settings.PUBLIC_BASE_URL.rstrip('/')}{status_path(patient)}"
