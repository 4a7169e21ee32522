"""Request bodies several apps' commands share."""

from __future__ import annotations

from rest_framework import serializers


class ReasonInput(serializers.Serializer):
    """A command that needs a reason (cancel, decline, withdraw): the reason and, optionally, the version the
    caller saw (a stale one is 409 ``VERSION_CONFLICT``)."""

    reason = serializers.CharField(max_length=200)
    expected_version = serializers.IntegerField(required=False, min_value=1)
