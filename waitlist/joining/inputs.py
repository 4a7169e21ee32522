"""Availability as the API and the pages take it: ``{"days": [...], "parts": [...]}`` or ``{"slots": [...]}``."""

from __future__ import annotations

from rest_framework import serializers

from common.api.errors import field_errors
from common.errors import ValidationFailed
from waitlist.joining import availability as av


class AvailabilityInput(serializers.Serializer):
    """``{"days": ["MON", …], "parts": ["MORNING", …]}`` (every part on every day) or ``{"slots": ["MON:MORNING",
    …]}``; absent: any time."""

    days = serializers.ListField(child=serializers.ChoiceField(choices=av.DAYS), required=False, max_length=7)
    parts = serializers.ListField(child=serializers.ChoiceField(choices=av.PARTS), required=False, max_length=3)
    slots = serializers.ListField(child=serializers.CharField(max_length=20), required=False, max_length=21)

    def validate(self, attrs):
        try:
            mask = av.mask_of_slots(attrs.get("slots", [])) | av.mask_of(
                attrs.get("days", av.DAYS if "parts" in attrs else []), attrs.get("parts", av.PARTS if "days" in attrs
                                                                               else []))
        except ValueError:
            raise serializers.ValidationError({"slots": ["Use DAY:PART, e.g. MON:MORNING."]}) from None
        if not mask:
            raise serializers.ValidationError("Name at least one day and part of the day.")
        return mask


def availability_of(data) -> int:
    """The mask of an availability object (``AvailabilityInput``), ANY_TIME when absent."""
    if data is None:
        return av.ANY_TIME
    serializer = AvailabilityInput(data=data)
    if not serializer.is_valid():
        raise ValidationFailed("The request is not valid.", fields={"availability": field_errors(serializer.errors)})
    return serializer.validated_data
