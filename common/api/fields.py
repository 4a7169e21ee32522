"""Serializer fields shared by every app's API."""

from __future__ import annotations

from datetime import datetime

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from common.bounds import OFFSET_REQUIRED, NaiveInstant, parse_instant


class ClinicRefField(serializers.Field):
    """A ref to an object of ``model`` inside the request's clinic; foreign and missing look alike."""

    default_error_messages = {"not_found": "Not found in this clinic.", "invalid": "Must be a ref string."}

    def __init__(self, model, **kwargs):
        self.model = model
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or not 0 < len(data) <= 40 or "\x00" in data:
            self.fail("invalid")
        obj = self.model.objects.filter(clinic=self.context["clinic"], ref=data).first()
        if obj is None:
            self.fail("not_found")
        return obj

    def to_representation(self, value):
        return value.ref


@extend_schema_field({"type": "string", "format": "date-time", "description": "ISO 8601 with an offset (Z or ±hh:mm)"})
class InstantField(serializers.DateTimeField):
    """A date-time that must carry its offset (``common.bounds.parse_instant``). DRF's own field reads a naive
    value in the default zone (UTC), so a clinic's wall time silently became another instant."""

    default_error_messages = {"naive": OFFSET_REQUIRED,
                              "invalid": "Give an ISO 8601 date-time with an offset (Z or ±hh:mm)."}

    def to_internal_value(self, value):
        if isinstance(value, datetime):
            if value.utcoffset() is None:
                self.fail("naive")
            return self.enforce_timezone(value)
        if not isinstance(value, str):
            self.fail("invalid")
        try:
            return self.enforce_timezone(parse_instant(value))
        except NaiveInstant:
            self.fail("naive")
        except (ValueError, OverflowError):
            self.fail("invalid")
