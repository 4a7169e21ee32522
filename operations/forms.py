"""Console forms: the sign-in form comes from django.contrib.auth; these are the console's own."""

from __future__ import annotations

import uuid
from typing import Any, cast

from django import forms
from django.core.validators import RegexValidator

from common.bounds import SEARCH_DAY_MESSAGE, is_searchable_day
from common.errors import ValidationFailed
from reevaluation.models import FailureClass
from reevaluation.redrive.services import check_classes


def searchable_day(value) -> None:
    """A filter day the clinic's zone can shift (not 9999-12-31 or year 1: common/bounds.py)."""
    if value is not None and not is_searchable_day(value):
        raise forms.ValidationError(SEARCH_DAY_MESSAGE)


printable = RegexValidator(r"^[\x21-\x7e]{1,200}$", "Use 1–200 printable characters without spaces.")


def code_choices(values, kind: str = "") -> list[tuple[str, str]]:
    """Choices whose labels are the glossary's words in the active language; the code stays the value (the URL's
    and the API's) and the option's tooltip (``CodeSelect``)."""
    from operations.labels import code_label

    return [(str(v), code_label(v, kind=kind)) for v in values]


class CodeSelect(forms.Select):
    """A select whose options carry their code as a tooltip."""

    def create_option(self, name, value, *args, **kwargs):
        option = super().create_option(name, value, *args, **kwargs)
        if value:
            option["attrs"]["title"] = str(value)
        return option


class CodeCheckboxes(forms.CheckboxSelectMultiple):
    """Checkboxes whose labels are words, with their code as a tooltip."""

    def create_option(self, name, value, *args, **kwargs):
        option = super().create_option(name, value, *args, **kwargs)
        option["attrs"]["title"] = str(value)
        return option


class AuditFilterForm(forms.Form):
    """Query parameters of the audit log: actor and action (partial, case-insensitive), a date range
    (local days in the clinic's zone, both ends included), changes or read-only previews, and the cursor."""

    actor = forms.CharField(max_length=150, required=False, strip=True)
    action = forms.CharField(max_length=80, required=False, strip=True)
    date_from = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}),
                                validators=[searchable_day])
    date_to = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}),
                              validators=[searchable_day])
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

    No confirm box for the default (TRANSIENT failures): a preview changes no job. Choosing CONTRACT or
    TRUST_PRIVACY needs its own explicit box (the service's rule, ``check_classes``). The key makes a
    double submit show the same preview.
    """

    failure_classes = forms.MultipleChoiceField(
        choices=lambda: code_choices(FailureClass.values),
        initial=[FailureClass.TRANSIENT],
        required=False,  # none ticked = the default, TRANSIENT
        widget=CodeCheckboxes,
        label="Failure classes",
    )
    include_non_transient = forms.BooleanField(
        required=False,
        label="CRM contract and trust or privacy failures were investigated: include them (never by default).",
    )
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

    def clean(self):
        data = cast(dict[str, Any], super().clean())  # Form.clean returns cleaned_data
        try:
            data["failure_classes"] = check_classes(
                data.get("failure_classes"), data.get("include_non_transient", False)
            )
        except ValidationFailed as exc:
            for name, messages in (exc.fields or {}).items():
                self.add_error(name if name in self.fields else None, messages)
        return data


class RedriveExecuteForm(ReasonConfirmForm):
    """EXECUTE exactly one earlier preview: its ref, the previewed jobs to leave out, a reason, the
    confirm box (and a second one when the preview includes CONTRACT/TRUST_PRIVACY failures)."""

    preview = forms.CharField(max_length=40, validators=[printable], widget=forms.HiddenInput)
    exclude = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Leave out (not redriven)"
    )

    def __init__(self, *args, targets=(), non_transient=False, **kwargs):
        kwargs.setdefault("auto_id", "execute_%s")  # element ids stay unique beside the other forms
        super().__init__(*args, **kwargs)
        from operations.labels import code_label

        cast(forms.ChoiceField, self.fields["exclude"]).choices = [
            (t["job"], f"{t['job']} ({code_label(t['failure_class'])})") for t in targets
        ]
        if non_transient:
            self.fields["confirm_non_transient"] = forms.BooleanField(
                required=True,
                label="This preview includes CRM contract or trust and privacy failures; they were investigated.",
            )


class SwitchSelect(CodeSelect):
    """A select that shows the current value first, disabled: submitting it unchanged sends nothing."""

    def __init__(self, *args, current: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.current = current

    def create_option(self, name, value, *args, **kwargs):
        option = super().create_option(name, value, *args, **kwargs)
        if value == self.current:
            option["attrs"]["disabled"] = True
        return option


class SwitchForm(ReasonConfirmForm):
    """A mode or drain switch: starts on the current value and offers only the allowed next moves
    (``reevaluation.models.mode_moves``/``drain_moves``, the rules the services apply)."""

    field_name = ""
    id_prefix = ""
    noun = ""
    kind = ""  # the glossary's family for the values (``mode``: the mutation mode's DISABLED)

    def __init__(self, *args, current: str, moves: list[str], **kwargs):
        kwargs.setdefault("auto_id", f"{self.id_prefix}_%s")
        super().__init__(*args, initial={self.field_name: current}, **kwargs)  # type: ignore[misc]
        self.current, self.moves = current, moves
        from operations.labels import code_label

        self.current_label = code_label(current, kind=self.kind)
        field = cast(forms.ChoiceField, self.fields[self.field_name])
        field.choices = [(current, f"{self.current_label} (current)")] + code_choices(moves, self.kind)
        field.widget = SwitchSelect(choices=field.choices, current=current)
        field.error_messages["required"] = f"Choose a new {self.noun}: {self.current_label} is already set."
        self.fields["confirm"].label = f"I want to change this clinic's {self.noun}."

    def clean(self):
        data = cast(dict[str, Any], super().clean())  # Form.clean returns cleaned_data
        value = data.get(self.field_name)
        from operations.labels import code_label

        if value == self.current:
            self.add_error(self.field_name, f"The {self.noun} is already {self.current_label}.")
        elif value and value not in self.moves:
            move = code_label(value, kind=self.kind)
            self.add_error(self.field_name, f"{move} is not an allowed move from {self.current_label}.")
        return data


class ModeSetForm(SwitchForm):
    field_name, id_prefix, noun, kind = "mode", "mode", "mutation mode", "mode"
    mode = forms.ChoiceField(label="Mutation mode")


class DrainSetForm(SwitchForm):
    field_name, id_prefix, noun = "state", "drain", "drain state"
    state = forms.ChoiceField(label="Drain state")


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
            ("PROMOTE", "Promote: offer the slot to this candidate despite the decision"),
            ("SKIP", "Skip: pass over this candidate and dispatch to the next"),
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
    date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), validators=[searchable_day])
    after = forms.CharField(max_length=40, required=False, validators=[printable])

    def __init__(self, data, *, statuses, practitioners=(), treatments=(), outcomes=(), fields=()):
        super().__init__(data)
        any_ = [("", "Any")]
        choice_fields = cast(dict[str, forms.ChoiceField], self.fields)
        choice_fields["status"].choices = any_ + code_choices(statuses)
        choice_fields["status"].widget = CodeSelect(choices=choice_fields["status"].choices)
        choice_fields["practitioner"].choices = any_ + list(practitioners)
        choice_fields["treatment"].choices = any_ + list(treatments)
        choice_fields["outcome"].choices = any_ + code_choices(outcomes)
        choice_fields["outcome"].widget = CodeSelect(choices=choice_fields["outcome"].choices)
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
        choices=[("PROMOTE", "Promote: offer each slot to its candidate"),
                 ("SKIP", "Skip: pass over each candidate and dispatch to the next")],
    )
    reason = forms.CharField(min_length=5, max_length=500, strip=True, widget=forms.Textarea(attrs={"rows": 2}))
    confirm = forms.BooleanField(required=False)
    idempotency_key = forms.CharField(
        max_length=150, validators=[printable], widget=forms.HiddenInput, initial=new_idempotency_key
    )
