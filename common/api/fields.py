"""Serializer fields shared by every app's API."""

from __future__ import annotations

from rest_framework import serializers


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
