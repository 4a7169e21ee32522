"""Input serializers for the operations endpoint (plain Serializers; no logic)."""

from rest_framework import serializers

from common.api import InstantField
from reevaluation.models import FailureClass


class SnapshotQuery(serializers.Serializer):
    clinic = serializers.CharField(max_length=40)
    after = serializers.CharField(max_length=40, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=200, required=False, default=20)


class DrainInput(serializers.Serializer):
    """An ADMIN's drain change; ``state: ACTIVE`` resumes a clinic stopped by an ADMIN or automatically."""

    clinic = serializers.CharField(max_length=40)
    state = serializers.ChoiceField(choices=["ACTIVE", "DRAINING", "DRAINED"])
    reason = serializers.CharField(max_length=500)


class RedriveInput(serializers.Serializer):
    """``actor`` is not a field: the actor is the authenticated user, whatever the body says."""

    action = serializers.ChoiceField(choices=["PREVIEW", "EXECUTE"])
    reason = serializers.CharField(max_length=500)
    clinic = serializers.CharField(max_length=40)
    target_revision = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    limit = serializers.IntegerField(min_value=1, max_value=100, required=False, default=20)
    failure_classes = serializers.ListField(
        child=serializers.ChoiceField(choices=FailureClass.values),
        required=False,
        allow_empty=False,
        max_length=3,
        help_text="PREVIEW: the failure classes to select (default TRANSIENT)",
    )
    include_non_transient = serializers.BooleanField(
        required=False, default=False, help_text="PREVIEW: explicit choice to include CONTRACT/TRUST_PRIVACY"
    )
    preview = serializers.CharField(max_length=40, required=False)
    exclude = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        default=list,
        max_length=100,
        help_text="EXECUTE: previewed job refs the ADMIN leaves out",
    )
    confirm_non_transient = serializers.BooleanField(
        required=False, default=False, help_text="EXECUTE: confirms a preview with CONTRACT/TRUST_PRIVACY jobs"
    )

    def validate(self, attrs):
        if attrs["action"] == "EXECUTE" and not attrs.get("preview"):
            raise serializers.ValidationError({"preview": ["EXECUTE needs the ref returned by PREVIEW."]})
        return attrs


class ReadoutQuery(serializers.Serializer):
    """The rollback readout: one clinic (or, without it, every clinic in scope) since a time (default: 24 h ago)."""

    clinic = serializers.CharField(max_length=40, required=False)
    since = InstantField(required=False, help_text="ISO 8601 with offset; default 24 hours ago")

    def validate_since(self, value):
        from common.bounds import is_searchable_day

        if not is_searchable_day(value.date()):
            raise serializers.ValidationError("A time between the years 1900 and 2999.")
        return value
