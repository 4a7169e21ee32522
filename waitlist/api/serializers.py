"""Plain input serializers and output shapes for the waitlist API (refs only, times with offset)."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from common.api import ClinicRefField, InstantField
from common.bounds import OFFSET_REQUIRED, NaiveInstant, is_bookable_time, parse_instant
from common.timefmt import iso_in_zone
from scheduling.models import Patient, Practitioner, Treatment
from waitlist.joining.availability import as_body as availability_body
from waitlist.joining.inputs import availability_of
from waitlist.models import FEED_DECISION_STATUSES, Offer, Vacancy, WaitlistEntry


@extend_schema_field({"type": "string", "description": "YYYY-MM-DD (clinic zone) or ISO 8601 with offset"})
class WindowBound(serializers.Field):
    """An aware datetime, or a date read in the clinic's zone: ``start`` → 00:00, ``end`` → 24:00."""

    default_error_messages = {
        "invalid": "Give an ISO 8601 date, or a date-time with an offset.",
        "naive": OFFSET_REQUIRED,
        "out_of_range": "Must be within a year before and five years after now.",
    }

    def __init__(self, *, end: bool, **kwargs):
        self.end = end
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            if len(data) == 10:
                day = date.fromisoformat(data)
                zone = ZoneInfo(self.context["clinic"].timezone)
                value = datetime.combine(day + timedelta(days=1 if self.end else 0), time(0), tzinfo=zone)
            else:
                value = parse_instant(data)
        except NaiveInstant:
            self.fail("naive")
        except (ValueError, OverflowError):  # OverflowError: the day after 9999-12-31
            self.fail("invalid")
        if not is_bookable_time(value):
            self.fail("out_of_range")
        return value

    def to_representation(self, value):
        return value.isoformat()


class EntryCreateInput(serializers.Serializer):
    patient = ClinicRefField(Patient)
    treatment = ClinicRefField(Treatment)
    practitioner = ClinicRefField(Practitioner, required=False, allow_null=True, default=None)
    earliest = WindowBound(end=False)
    latest = WindowBound(end=True)
    priority_rank = serializers.IntegerField(required=False, default=0, min_value=-1000, max_value=1000)
    resource_kind = serializers.CharField(required=False, default="", allow_blank=True, max_length=40)
    #: When the patient can come (``waitlist.joining.api.AvailabilityInput``); absent: any time.
    availability = serializers.JSONField(required=False, default=None, allow_null=True)

    def to_internal_value(self, data):
        if isinstance(data, dict) and data.get("practitioner") is None:
            data = {k: v for k, v in data.items() if k != "practitioner"}
        return super().to_internal_value(data)

    def validate(self, attrs):
        if attrs["latest"] <= attrs["earliest"]:
            raise serializers.ValidationError({"latest": ["Must be after earliest."]})
        attrs["availability"] = availability_of(attrs.get("availability"))
        return attrs


class PriorityInput(serializers.Serializer):
    priority_rank = serializers.IntegerField(min_value=-1000, max_value=1000)
    reason = serializers.CharField(max_length=500)
    expected_version = serializers.IntegerField(required=False, min_value=1)


class OptionalReasonInput(serializers.Serializer):
    reason = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
    expected_version = serializers.IntegerField(required=False, min_value=1)


class ClaimInput(serializers.Serializer):
    expected_version = serializers.IntegerField(min_value=1)


class DecisionInput(serializers.Serializer):
    patient = ClinicRefField(Patient)
    decision_ref = serializers.CharField(max_length=80)
    status = serializers.ChoiceField(choices=[s.value for s in FEED_DECISION_STATUSES])
    priority_rank = serializers.IntegerField(required=False, default=0, min_value=-1000, max_value=1000)
    expires_at = InstantField()

    def validate_expires_at(self, value):
        if not is_bookable_time(value):
            raise serializers.ValidationError("Must be within a year before and five years after now.")
        return value


def entry_body(entry: WaitlistEntry, tz: str) -> dict:
    return {
        "ref": entry.ref,
        "status": entry.status,
        "version": entry.version,
        "waiting_since": iso_in_zone(entry.waiting_since, tz),
        "patient": entry.patient.ref,
        "treatment": entry.treatment.ref,
        "practitioner": entry.practitioner.ref if entry.practitioner else None,
        "earliest": iso_in_zone(entry.earliest, tz),
        "latest": iso_in_zone(entry.latest, tz),
        "priority_rank": entry.priority_rank,
        "resource_kind": entry.resource_kind,
        "asked_last_since": iso_in_zone(entry.asked_last_since, tz),
        "availability": availability_body(entry.availability),
    }


def vacancy_body(vacancy: Vacancy, active: Offer | None, tz: str) -> dict:
    return {
        "ref": vacancy.ref,
        "status": vacancy.status,
        "version": vacancy.version,
        "active_offer": active.ref if active else None,
        "starts_at": iso_in_zone(vacancy.starts_at, tz),
        "ends_at": iso_in_zone(vacancy.ends_at, tz),
        "practitioner": vacancy.practitioner.ref,
        "treatment": vacancy.treatment.ref,
        "resource": vacancy.resource.ref if vacancy.resource else None,
        "waiting": {"reason": vacancy.waiting_reason, "until": iso_in_zone(vacancy.waiting_until, tz)}
        if vacancy.waiting_reason
        else None,
    }


def offer_body(offer: Offer, tz: str) -> dict:
    return {
        "ref": offer.ref,
        "status": offer.status,
        "version": offer.version,
        "expires_at": iso_in_zone(offer.expires_at, tz),
        "vacancy": offer.vacancy.ref,
        "entry": offer.entry.ref,
        "hold": offer.hold.ref,
        "hold_status": offer.hold.status,
        # The appointment the claim's hold became once booked (null until then).
        "appointment": offer.hold.appointment.ref if offer.hold.appointment else None,
        "policy_version": offer.policy_version,
        "policy_digest": offer.policy_digest,
        "decision_ref": offer.decision_ref,
        "decision_status": offer.decision_status,
        "decision_expires_at": iso_in_zone(offer.decision_expires_at, tz) if offer.decision_expires_at else None,
        "reason_code": offer.reason_code,
        "decline_reason": offer.decline_reason,
        "notified_at": iso_in_zone(offer.notified_at, tz) if offer.notified_at else None,
        # Booked at once under the patient's standing acceptance; the patient may release it until then.
        "standing": offer.standing,
        "release_until": iso_in_zone(offer.release_until, tz) if offer.release_until else None,
        # A late accept: the patient's offer of this vacancy that ended unanswered and that this one took up again.
        "renews": offer.renews.ref if offer.renews is not None else None,
    }


class StandingAcceptanceInput(serializers.Serializer):
    """A grant or revoke of an entry's standing acceptance, on the patient's word (API) or by staff (STAFF:
    ``reason`` says how the patient agreed)."""

    state = serializers.ChoiceField(choices=["GRANTED", "REVOKED"])
    min_notice_minutes = serializers.IntegerField(required=False, default=0, min_value=0, max_value=7 * 24 * 60)
    source = serializers.ChoiceField(choices=["API", "STAFF"], required=False, default="API")  # type: ignore[assignment]  # a body field named like Field.source
    reason = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


def standing_body(row, tz: str) -> dict | None:
    if row is None:
        return None
    return {"ref": row.ref, "state": row.state, "min_notice_minutes": row.min_notice_minutes, "source": row.source,
            "recorded_at": iso_in_zone(row.recorded_at, tz)}


class RecoveryInput(serializers.Serializer):
    """``actor`` is not a field: the actor is the authenticated user, whatever the body says."""

    reason = serializers.CharField(max_length=500)


class ShadowPublishInput(RecoveryInput):
    """The policy fields to change (names as in ``WaitlistPolicy``); the rest stay as enforced."""

    changes = serializers.DictField(allow_empty=False)


class ReviewInput(serializers.Serializer):
    """Resolve a vacancy in staff review. ``actor`` is not a field: it is the authenticated user."""

    resolution = serializers.ChoiceField(choices=["PROMOTE", "SKIP"])
    reason = serializers.CharField(max_length=500)
    expected_version = serializers.IntegerField(required=False, min_value=1)


class OpsQuery(serializers.Serializer):
    clinic = serializers.CharField(max_length=40)
    after = serializers.CharField(max_length=200, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=200, required=False, default=50)
