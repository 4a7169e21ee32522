"""Console forms: the sign-in form comes from django.contrib.auth; these are the console's own."""

from __future__ import annotations

import uuid

from django import forms
from django.core.validators import RegexValidator

printable = RegexValidator(r"^[\x21-\x7e]{1,200}$", "Use 1–200 printable characters without spaces.")


class AuditFilterForm(forms.Form):
    """Query parameters of the audit log: an exact action code and the keyset cursor."""

    action = forms.CharField(max_length=80, required=False, strip=True)
    after = forms.CharField(max_length=40, required=False, validators=[printable])


def new_idempotency_key() -> str:
    return uuid.uuid4().hex


class ReasonConfirmForm(forms.Form):
    """The body of every ADMIN action: why, an explicit confirmation, and the idempotency key.

    The key is minted when the form is rendered, so a double submit or a retried request replays
    the first result instead of acting twice. The actor is never a field: it is ``request.user``.
    """

    reason = forms.CharField(
        min_length=5, max_length=500, strip=True, widget=forms.Textarea(attrs={"rows": 3})
    )
    confirm = forms.BooleanField(required=True, label="I have checked the preview and want to proceed.")
    idempotency_key = forms.CharField(
        max_length=200, validators=[printable], widget=forms.HiddenInput, initial=new_idempotency_key
    )
