"""Input serializers (plain, no logic) and output shapes for scheduling."""

from __future__ import annotations

from rest_framework import serializers

from common.api import ClinicRefField, InstantField, ReasonInput
from common.bounds import is_bookable_time
from common.timefmt import iso_in_zone

from ..models import (
    CALLER_CANCEL_REASONS,
    Appointment,
    AppointmentStatus,
    CancelReason,
    ConsentSource,
    ConsentState,
    ContactChannel,
    Language,
    Patient,
    Practitioner,
    Resource,
    Treatment,
)


class PatientCreateInput(serializers.Serializer):
    display_name = serializers.CharField(max_length=200)
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    phone = serializers.CharField(max_length=40, required=False, allow_blank=True, default="",
                                  help_text="read for the clinic's country, stored in E.164 (else 400 PHONE_INVALID)")
    language = serializers.ChoiceField(choices=Language.choices)
    crm_patient_ref = serializers.CharField(required=False, max_length=200)
    contact_consent = serializers.ListField(
        child=serializers.ChoiceField(choices=ContactChannel.choices), required=False, default=list, max_length=2,
        help_text="channels the patient agreed to be contacted on (recorded GRANTED, source API)",
    )


class ConsentInput(serializers.Serializer):
    channels = serializers.ListField(child=serializers.ChoiceField(choices=ContactChannel.choices), min_length=1,
                                     max_length=2)
    state = serializers.ChoiceField(choices=ConsentState.choices)
    # The metaclass moves declared fields off the class, so this does not shadow Field.source at run time.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=[(ConsentSource.API, "API"), (ConsentSource.PATIENT_CONSENT, "PATIENT_CONSENT")],
        default=ConsentSource.API, required=False,
        help_text="PATIENT_CONSENT: the patient's own new consent, the only way to grant a channel they opted out "
                  "of; needs state GRANTED and evidence",
    )
    evidence = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                     help_text="a reference to the patient's new consent (form or call record id)")


class AppointmentCreateInput(serializers.Serializer):
    patient = ClinicRefField(Patient)
    practitioner = ClinicRefField(Practitioner)
    treatment = ClinicRefField(Treatment)
    resource = ClinicRefField(Resource, required=False, allow_null=True, default=None)
    starts_at = InstantField()
    status = serializers.ChoiceField(
        choices=[AppointmentStatus.PROPOSED, AppointmentStatus.HELD, AppointmentStatus.CONFIRMED]
    )

    def to_internal_value(self, data):
        if isinstance(data, dict) and data.get("resource") is None:
            data = {k: v for k, v in data.items() if k != "resource"}
        return super().to_internal_value(data)

    def validate_starts_at(self, value):
        if not is_bookable_time(value):
            raise serializers.ValidationError("Must be within a year before and five years after now.")
        return value


def appointment_body(appointment: Appointment) -> dict:
    tz = appointment.clinic.timezone
    return {
        "ref": appointment.ref,
        "status": appointment.status,
        "version": appointment.version,
        "starts_at": iso_in_zone(appointment.starts_at, tz),
        "ends_at": iso_in_zone(appointment.ends_at, tz),
        "patient": appointment.patient.ref,
        "practitioner": appointment.practitioner.ref,
        "treatment": appointment.treatment.ref,
        "resource": appointment.resource.ref if appointment.resource else None,
    }


def reference_body(obj) -> dict:
    body = {"ref": obj.ref, "name": obj.name}
    if isinstance(obj, Treatment):
        body["duration_minutes"] = obj.duration_minutes
    return body


class CancelInput(ReasonInput):
    """An appointment's cancellation: the free-text ``reason`` and a ``reason_code`` (default OTHER)."""

    reason_code = serializers.ChoiceField(choices=CALLER_CANCEL_REASONS, required=False, default=CancelReason.OTHER)
