"""The policy editor's form, derived from the model: one field per ``WaitlistPolicy.editable_fields()``
with the model's type, choices, validators and help text (shared by the console and ``waitlist_policy``)."""

from __future__ import annotations

from django import forms

from waitlist.models import WaitlistPolicy


def policy_form_class() -> type[forms.ModelForm]:
    return forms.modelform_factory(WaitlistPolicy, fields=WaitlistPolicy.editable_fields())


def policy_form(current: WaitlistPolicy, data=None, **kwargs) -> forms.ModelForm:
    """Bound to ``data`` (or showing ``current``'s values); never saves: ``policy_change`` publishes."""
    initial = {name: getattr(current, name) for name in WaitlistPolicy.editable_fields()}
    return policy_form_class()(data=data, initial=initial, **kwargs)


def policy_changes(form: forms.BaseForm, current: WaitlistPolicy) -> dict:
    """The cleaned values that differ from ``current`` (what the new version changes)."""
    return {name: value for name, value in form.cleaned_data.items()
            if name in WaitlistPolicy.editable_fields() and getattr(current, name) != value}
