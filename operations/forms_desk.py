"""The front desk's forms: what staff type while the patient is on the phone.

They check shape only (required, lengths); the meaning (refs in this clinic, windows, states) is checked by the
API's own serializers and services when the command runs, so the console refuses exactly what the API refuses,
with the same typed error. Every form carries its idempotency key (minted when it is rendered).
"""

from __future__ import annotations

from typing import cast

from django import forms

from scheduling.models import CALLER_CANCEL_REASONS
from waitlist.joining.availability import DAYS, PARTS

from .forms import new_idempotency_key

PHONE_LABEL = "The patient said so on the phone"
#: The evidence the audit row keeps for a verb taken on the patient's word.
PHONE_EVIDENCE = "the patient said so on the phone"
#: Priority choices (``priority_rank``): STAFF put a patient in at NORMAL; a band above or below is ADMIN's.
PRIORITY_CHOICES = [("0", "Normal"), ("100", "High (ADMIN)"), ("-100", "Low (ADMIN)")]
#: The join page's days and parts of the day (``waitlist.joining.availability``), in the console's words.
DAY_CHOICES = list(zip(DAYS, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
                       strict=True))
PART_CHOICES = list(zip(PARTS, ("Morning (before 12:00)", "Afternoon (12:00–17:00)", "Evening (from 17:00)"),
                        strict=True))


class DeskForm(forms.Form):
    idempotency_key = forms.CharField(widget=forms.HiddenInput, max_length=200)

    def __init__(self, *args, prefix_id: str, **kwargs):
        kwargs.setdefault("auto_id", f"{prefix_id}_%s")
        if not args or args[0] is None:
            kwargs.setdefault("initial", {"idempotency_key": new_idempotency_key()})
        super().__init__(*args, **kwargs)


def _ref_field(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(label=label, max_length=40, strip=True, help_text=help_text,
                           widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))


class CancelForm(DeskForm):
    appointment = _ref_field("Appointment", "Its code (e.g. GN-7KQ3) or ref.")
    reason_code = forms.ChoiceField(label="Why", choices=[(c.value, c.label) for c in CALLER_CANCEL_REASONS])
    reason = forms.CharField(label="Reason (recorded with the appointment)", max_length=200, strip=True)


class EntryForm(DeskForm):
    patient = _ref_field("Patient ref", "From the patient's record (pt_…): the waitlist is not a name search.")
    treatment = forms.ChoiceField(label="Treatment")
    practitioner = forms.ChoiceField(label="Practitioner", required=False)
    earliest = forms.DateField(label="From", widget=forms.DateInput(attrs={"type": "date"}))
    latest = forms.DateField(label="To (included)", widget=forms.DateInput(attrs={"type": "date"}))
    priority_rank = forms.ChoiceField(label="Priority", choices=PRIORITY_CHOICES, initial="0")
    any_time = forms.BooleanField(label="Any time", required=False, initial=True,
                                  help_text="Untick to name the days and parts of the day the patient can come "
                                            "(nothing ticked is any time).")
    days = forms.MultipleChoiceField(label="Days", choices=DAY_CHOICES, required=False,
                                     widget=forms.CheckboxSelectMultiple,
                                     help_text="None ticked: every day, at the parts ticked.")
    parts = forms.MultipleChoiceField(label="Parts of the day", choices=PART_CHOICES, required=False,
                                      widget=forms.CheckboxSelectMultiple,
                                      help_text="None ticked: all day, on the days ticked.")

    def __init__(self, *args, treatments, practitioners, may_prioritise: bool, **kwargs):
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["treatment"]).choices = list(treatments)
        cast(forms.ChoiceField, self.fields["practitioner"]).choices = [("", "Any practitioner"), *practitioners]
        if not may_prioritise:
            cast(forms.ChoiceField, self.fields["priority_rank"]).choices = PRIORITY_CHOICES[:1]
            self.fields["priority_rank"].help_text = "Only an ADMIN sets a priority above or below normal."

    def clean(self):
        data = super().clean() or {}
        named = bool(data.get("days") or data.get("parts"))
        if data.get("any_time") and named:
            self.add_error("any_time", "Untick “Any time” to keep the days or parts of the day you ticked.")
        # The API's availability object (``waitlist.joining.inputs.AvailabilityInput``); None is any time.
        # Nothing ticked at all is any time too (the API's default when availability is absent).
        data["availability"] = None if data.get("any_time") or not named else {
            key: data[key] for key in ("days", "parts") if data.get(key)}
        return data


class PhoneForm(DeskForm):
    """A verb taken on the patient's word: the evidence box is required and recorded in the audit row."""

    phone = forms.BooleanField(label=PHONE_LABEL, required=True)
    note = forms.CharField(label="Note (optional, no patient details)", max_length=200, required=False, strip=True)


class OfferPhoneForm(PhoneForm):
    offer = _ref_field("Offer", "Its code (e.g. GN-7KQ3) or ref.")
    field_order = ["offer", "phone", "note"]


class DeclineForm(OfferPhoneForm):
    reason = forms.CharField(label="Why they declined", max_length=200, required=False, strip=True)
    field_order = ["offer", "reason", "phone", "note"]


class StandingForm(PhoneForm):
    entry = _ref_field("Waitlist entry", "Its ref (wle_…).")
    state = forms.ChoiceField(label="Book automatically", choices=[("GRANTED", "Yes: book me automatically"),
                                                                   ("REVOKED", "No longer")])
    min_notice_minutes = forms.IntegerField(label="At least this many minutes' notice", min_value=0,
                                            max_value=7 * 24 * 60, initial=0)
    field_order = ["entry", "state", "min_notice_minutes", "phone", "note"]


class ReleaseForm(OfferPhoneForm):
    reason = forms.CharField(label="Why they release it", max_length=200, strip=True)
    field_order = ["offer", "reason", "phone", "note"]
