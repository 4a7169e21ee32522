"""Input serializers for the operations endpoint (plain Serializers; no logic)."""

from rest_framework import serializers


class SnapshotQuery(serializers.Serializer):
    clinic = serializers.CharField(max_length=40)
    after = serializers.CharField(max_length=40, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=200, required=False, default=20)


class RedriveInput(serializers.Serializer):
    """``actor`` is not a field: the actor is the authenticated user, whatever the body says."""

    action = serializers.ChoiceField(choices=["PREVIEW", "EXECUTE"])
    reason = serializers.CharField(max_length=500)
    clinic = serializers.CharField(max_length=40)
    target_revision = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    limit = serializers.IntegerField(min_value=1, max_value=100, required=False, default=20)
    preview = serializers.CharField(max_length=40, required=False)

    def validate(self, attrs):
        if attrs["action"] == "EXECUTE" and not attrs.get("preview"):
            raise serializers.ValidationError({"preview": ["EXECUTE needs the ref returned by PREVIEW."]})
        return attrs
