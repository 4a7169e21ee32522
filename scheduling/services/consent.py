"""Contact consent: append a row per change; the newest row per (patient, channel) is the current state.

Dispatch (``waitlist.dispatch.matcher``) offers only to a patient with a GRANTED channel the clinic's provider uses,
and delivery sends only on a GRANTED channel. A no-op change (same state again) appends nothing, so the
history shows changes, not clicks. The patient's own opt-out is reversed only by the patient's new consent
(``ConsentSource.PATIENT_CONSENT`` with evidence).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from common.errors import ConsentOptedOut, ValidationFailed

from ..models import ConsentSource, ConsentState, ContactChannel, ContactConsent, Patient
from ..queries import consent_newest_per_channel

#: The channel each notification provider uses (``clinic.settings["notification"]["provider"]``). The demo's
#: console provider stands in for either, so either consent will do.
PROVIDER_CHANNELS = {
    "email": (ContactChannel.EMAIL,),
    "webhook": (ContactChannel.SMS,),
    "sms": (ContactChannel.SMS, ContactChannel.EMAIL),  # texts first, e-mail where there is no text
    "console": (ContactChannel.EMAIL, ContactChannel.SMS),
}


def consent_current(patient_id: int) -> dict[str, str | None]:
    """``{channel: GRANTED | REVOKED | None}`` from the newest row of each channel (one query)."""
    state: dict[str, str | None] = dict.fromkeys(ContactChannel.values)
    state.update(consent_newest_per_channel(patient_id))
    return state


def opted_out_by_patient(patient_id: int) -> list[str]:
    """Channels whose newest row is the patient's own opt-out (REVOKED through the link in a notice)."""
    rows = (ContactConsent.objects.filter(patient_id=patient_id).order_by("channel", "-id")
            .distinct("channel").values_list("channel", "state", "source"))
    return [channel for channel, state, source in rows
            if state == ConsentState.REVOKED and source in (ConsentSource.OPT_OUT_LINK, ConsentSource.TEXT_REPLY)]


def consent_record(
    *, patient: Patient, channels: list[str] | tuple[str, ...], state: str, source: str, actor_label: str,
    evidence: str = "", now=None,
) -> list[ContactConsent]:
    """Set ``channels`` to ``state`` for the patient; returns the rows appended (none for a no-op).

    A channel the patient opted out of themselves (newest row: REVOKED, OPT_OUT_LINK) is granted again only
    with the patient's new consent recorded as such: ``source`` PATIENT_CONSENT and ``evidence`` (a reference to
    the form or call, kept on the row). Anything else is ``ConsentOptedOut`` and changes nothing, whatever
    the caller's role: staff never re-grant over a patient's opt-out on their own."""
    if state not in ConsentState.values or source not in ConsentSource.values:
        raise ValidationFailed("Unknown consent state or source.", fields={"state": [state], "source": [source]})
    unknown = [c for c in channels if c not in ContactChannel.values]
    if unknown or not channels:
        raise ValidationFailed("Unknown contact channel.", fields={"channels": unknown or ["Give a channel."]})
    evidence = (evidence or "").strip()
    if source == ConsentSource.PATIENT_CONSENT and (state != ConsentState.GRANTED or not evidence):
        raise ValidationFailed("The patient's new consent grants a channel and names its evidence.",
                               fields={"evidence": ["Give a reference to the patient's new consent."]})
    now = now or timezone.now()
    with transaction.atomic():
        # Serialise changes of one patient so "newest row" and "no-op" are judged on the truth.
        Patient.objects.select_for_update(no_key=True).filter(pk=patient.pk).first()
        if state == ConsentState.GRANTED and source != ConsentSource.PATIENT_CONSENT:
            blocked = [c for c in opted_out_by_patient(patient.pk) if c in channels]
            if blocked:
                raise ConsentOptedOut(
                    "The patient opted out of these channels themselves; only their new consent can grant them "
                    "again (source PATIENT_CONSENT with evidence).", fields={"channels": blocked})
        current = consent_current(patient.pk)
        return [
            ContactConsent.objects.create(clinic_id=patient.clinic_id, patient=patient, channel=channel, state=state,
                                          source=source, actor=actor_label[:150], recorded_at=now,
                                          evidence=evidence[:200])
            for channel in dict.fromkeys(channels)
            if current[channel] != state
        ]


def consent_granted(patient_id: int, channels) -> bool:
    """True when any of ``channels`` is currently GRANTED for the patient."""
    current = consent_current(patient_id)
    return any(current[c] == ConsentState.GRANTED for c in channels)


def provider_channels(clinic_settings: dict) -> tuple[str, ...]:
    from common.notify import provider_kind

    return PROVIDER_CHANNELS.get(provider_kind(clinic_settings), PROVIDER_CHANNELS["console"])
