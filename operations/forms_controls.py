"""Forms of the waitlist controls page: each is the ADMIN reason + confirm + idempotency-key form plus
its own fields; the policy form's fields come from the model (``waitlist.policy.forms.policy_form_class``)."""

from __future__ import annotations

from django import forms

from waitlist.policy.forms import policy_form_class

from .forms import ReasonConfirmForm
from .labels import policy_help, policy_label, policy_unit

ON_OFF = [("on", "On"), ("off", "Off")]


class _ControlForm(ReasonConfirmForm):
    prefix_name = ""
    confirm_label = ""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", f"{self.prefix_name}_%s")  # ids stay unique beside the other forms
        super().__init__(*args, **kwargs)
        self.fields["confirm"].label = self.confirm_label


class SwitchForm(_ControlForm):
    prefix_name = "switch"
    confirm_label = "I want to change whether this clinic makes waitlist offers."
    state = forms.ChoiceField(choices=ON_OFF, label="Waitlist at this clinic")


class AllowlistForm(_ControlForm):
    prefix_name = "allowlist"
    confirm_label = "I want to change the rollout allowlist for every clinic of this tenant."
    state = forms.ChoiceField(choices=[("on", "Allowed"), ("off", "Not allowed")], label="Tenant on the allowlist")


class ShadowPromoteForm(_ControlForm):
    prefix_name = "shadow_promote"
    confirm_label = "I have checked the preview and want to enforce the shadow's values as a new policy version."


class ShadowDiscardForm(_ControlForm):
    prefix_name = "shadow_discard"
    confirm_label = "I want to stop observing this shadow policy (its observations stay as history)."


def policy_edit_form(current, data=None) -> ReasonConfirmForm:
    """The model-derived policy fields, then reason, confirm and key; ``expected_version`` pins the version
    the ADMIN looked at, so a change made meanwhile is a VERSION_CONFLICT rather than silently overwritten."""

    class PolicyEditForm(_ControlForm, policy_form_class()):  # type: ignore[misc]  # built from the model
        prefix_name = "policy"
        confirm_label = "I want to publish these values as a new policy version."
        expected_version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)

    names = current.editable_fields()
    form = PolicyEditForm(data=data, initial=_initial(current, names))
    for name in names:  # the clinic's words and the unit in the label, the effect as the help text
        unit = policy_unit(name)
        form.fields[name].label = policy_label(name) + (f" ({unit})" if unit and unit != "yes/no" else "")
        form.fields[name].help_text = policy_help(name)
    return form


def _initial(current, names) -> dict:
    return {name: getattr(current, name) for name in names} | {"expected_version": current.version}

