"""Console forms: the sign-in form comes from django.contrib.auth; these are the console's own."""

from __future__ import annotations

import uuid

from django import forms
from django.core.validators import RegexValidator

printable = RegexValidator(r"^[\x21-\x7e]{1,200}$", "Use 1–200 printable characters without spaces.")


class AuditFilterForm(forms.Form):
    """Query parameters of the audit log: actor and action (partial, case-insensitive), a date range
    (local days in the clinic's zone, both ends included), changes or read-only previews, and the cursor."""

    actor = forms.CharField(max_length=150, required=False, strip=True)
    action = forms.CharField(max_length=80, required=False, strip=True)
    date_from = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    kind = forms.ChoiceField(
        required=False, label="Show",
        choices=[("", "Changes and previews"), ("changes", "Changes only"), ("previews", "Read-only previews only")],
    )
    after = forms.CharField(max_length=40, required=False, validators=[printable])

    def filters(self) -> dict:
        return {k: v for k, v in self.cleaned_data.items() if k != "after" and v not in ("", None)}


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


class CursorForm(forms.Form):
    """A keyset cursor (the ref of the last row shown) for "load more" fragments."""

    after = forms.CharField(max_length=40, required=False, validators=[printable])


class RedrivePreviewForm(forms.Form):
    """PREVIEW a redrive in the current clinic (the scope is the URL's clinic, never a field).

    No confirm box: a preview changes no job. The key makes a double submit show the same preview.
    """

    target_revision = forms.IntegerField(
        required=False, min_value=0, label="Target revision (optional)", widget=forms.NumberInput
    )
    limit = forms.IntegerField(min_value=1, max_value=100, initial=20)
    reason = forms.CharField(min_length=5, max_length=500, strip=True, widget=forms.Textarea(attrs={"rows": 2}))
    idempotency_key = forms.CharField(
        max_length=200, validators=[printable], widget=forms.HiddenInput, initial=new_idempotency_key
    )

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "preview_%s")
        super().__init__(*args, **kwargs)


class RedriveExecuteForm(ReasonConfirmForm):
    """EXECUTE exactly one earlier preview: its ref, a reason, the confirm box and the key."""

    preview = forms.CharField(max_length=40, validators=[printable], widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "execute_%s")  # element ids stay unique beside the other forms
        super().__init__(*args, **kwargs)


class ModeSetForm(ReasonConfirmForm):
    mode = forms.ChoiceField(label="Mutation mode")

    def __init__(self, *args, choices=(), **kwargs):
        kwargs.setdefault("auto_id", "mode_%s")
        super().__init__(*args, **kwargs)
        self.fields["mode"].choices = [(c, c) for c in choices]
        self.fields["confirm"].label = "I want to change this clinic's mutation mode."


class DrainSetForm(ReasonConfirmForm):
    state = forms.ChoiceField(label="Drain state")

    def __init__(self, *args, choices=(), **kwargs):
        kwargs.setdefault("auto_id", "drain_%s")
        super().__init__(*args, **kwargs)
        self.fields["state"].choices = [(c, c) for c in choices]
        self.fields["confirm"].label = "I want to change this clinic's drain state."


class WaitlistCursorForm(forms.Form):
    """The waitlist action queue's keyset cursor (``<at>|<kind>|<ref>`` from ``ops_action_queue``)."""

    after = forms.CharField(max_length=200, required=False, validators=[printable])


WAITLIST_CONFIRM_LABELS = {
    "withdraw": "I want to withdraw this offer (its hold is released; the next candidate is offered).",
    "redispatch": "I want to dispatch this vacancy again.",
    "retry_booking": "I want to run the booking command for this hold again.",
    "review": "I have checked the evidence and want to resolve this review.",
}


class WaitlistCommandForm(ReasonConfirmForm):
    """One waitlist command on one row: reason, confirm box, idempotency key. The target ref is the URL's."""

    def __init__(self, *args, command: str, **kwargs):
        kwargs.setdefault("auto_id", f"{command}_%s")  # ids stay unique beside the panel's other forms
        super().__init__(*args, **kwargs)
        self.fields["confirm"].label = WAITLIST_CONFIRM_LABELS[command]


class WaitlistReviewForm(WaitlistCommandForm):
    resolution = forms.ChoiceField(
        label="Resolution",
        choices=[
            ("PROMOTE", "PROMOTE: offer the slot to this candidate despite the decision"),
            ("SKIP", "SKIP: pass over this candidate and dispatch to the next"),
        ],
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, command="review", **kwargs)


class ListFilterForm(forms.Form):
    """Filters of a console list (state, practitioner, treatment, local day, outcome, failure code) and
    its keyset cursor. Choices are set per list and clinic; an unknown value is a 400, not a silent no-op."""

    status = forms.ChoiceField(required=False, label="State")
    practitioner = forms.ChoiceField(required=False)
    treatment = forms.ChoiceField(required=False)
    outcome = forms.ChoiceField(required=False)
    failure_code = forms.CharField(required=False, max_length=40, label="Failure code", validators=[printable])
    date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    after = forms.CharField(max_length=40, required=False, validators=[printable])

    def __init__(self, data, *, statuses, practitioners=(), treatments=(), outcomes=(), fields=()):
        super().__init__(data)
        any_ = [("", "Any")]
        self.fields["status"].choices = any_ + [(s, s) for s in statuses]
        self.fields["practitioner"].choices = any_ + list(practitioners)
        self.fields["treatment"].choices = any_ + list(treatments)
        self.fields["outcome"].choices = any_ + [(o, o) for o in outcomes]
        for name in [n for n in self.fields if n not in (*fields, "after")]:
            del self.fields[name]

    def filters(self) -> dict:
        """The non-empty filters, without the cursor (for the selector and the "load more" link)."""
        return {k: v for k, v in self.cleaned_data.items() if k != "after" and v not in ("", None)}


class RefListField(forms.MultipleChoiceField):
    """Several refs of one kind (checkboxes); their scope is checked by the service, one by one."""

    def __init__(self, *, prefix: str, max_items: int, **kwargs):
        self.prefix, self.max_items = prefix, max_items
        super().__init__(**kwargs)

    def valid_value(self, value) -> bool:
        return isinstance(value, str) and value.startswith(self.prefix + "_") and 0 < len(value) <= 40

    def validate(self, value):
        super().validate(value)
        if len(value) > self.max_items:
            raise forms.ValidationError(f"Select at most {self.max_items}.")


class BulkReviewForm(forms.Form):
    """Resolve several vacancies in staff review with one resolution and one reason. ``confirm`` is
    set by the summary step's button: without it the view only shows what would happen."""

    BULK_MAX = 50

    vacancies = RefListField(prefix="vac", max_items=BULK_MAX, label="Vacancies")
    resolution = forms.ChoiceField(
        choices=[("PROMOTE", "PROMOTE: offer each slot to its candidate"),
                 ("SKIP", "SKIP: pass over each candidate and dispatch to the next")],
    )
    reason = forms.CharField(min_length=5, max_length=500, strip=True, widget=forms.Textarea(attrs={"rows": 2}))
    confirm = forms.BooleanField(required=False)
    idempotency_key = forms.CharField(
        max_length=150, validators=[printable], widget=forms.HiddenInput, initial=new_idempotency_key
    )
