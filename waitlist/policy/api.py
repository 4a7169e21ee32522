"""Operator controls over the API (docs/api.md "Waitlist controls"): the clinic switch, the tenant
allowlist and the versioned policy. Reads are STAFF, changes ADMIN; every change takes a reason, runs
under the Idempotency-Key and is audited by the service."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response

from common.api import ClinicAPIView
from scheduling.models import Role
from scheduling.scoping import command_role
from waitlist import services
from waitlist.models import WaitlistPolicy
from waitlist.policy.reads import controls_snapshot, policy_body


class ReasonedInput(serializers.Serializer):
    """``actor`` is not a field: the actor is the authenticated user, whatever the body says."""

    reason = serializers.CharField(max_length=500)


class SwitchInput(ReasonedInput):
    enabled = serializers.BooleanField()


class AllowlistInput(ReasonedInput):
    allowed = serializers.BooleanField()


class PolicyChangeInput(serializers.ModelSerializer):
    """Derived from the model: each editable field with its type, choices, bounds and help text. Send only
    the fields that change; the rest keep the current version's values."""

    reason = serializers.CharField(max_length=500)
    expected_version = serializers.IntegerField(required=False, min_value=1)

    class Meta:
        model = WaitlistPolicy
        fields = (*WaitlistPolicy.editable_fields(), "reason", "expected_version")
        extra_kwargs = {name: {"required": False} for name in WaitlistPolicy.editable_fields()}

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields)) if isinstance(self.initial_data, dict) else []
        if unknown:  # e.g. a matcher budget: refused by name rather than silently dropped
            raise serializers.ValidationError({name: ["Not an editable policy field."] for name in unknown})
        return attrs


class _ControlsView(ClinicAPIView):
    """Reads need STAFF, the write ``write_command`` the role ``scoping.COMMAND_ROLES`` gives it."""

    write_command = ""

    def role_for(self, request) -> Role:
        return Role.STAFF if request.method in SAFE_METHODS else command_role(self.write_command)


def _key(request) -> str:
    return request.headers.get("Idempotency-Key", "")


def _controls_body(clinic) -> dict:
    snapshot = controls_snapshot(clinic=clinic)
    return {"switch": snapshot["switch"], "tenant_group": snapshot["tenant_group"], "policy": snapshot["policy_body"]}


class WaitlistControlsView(_ControlsView):
    @extend_schema(responses={200: OpenApiResponse(description="{switch, tenant_group, policy}")})
    def get(self, request, clinic):
        return Response(_controls_body(self.clinic))


class WaitlistSwitchView(_ControlsView):
    """ADMIN: switch the waitlist on/off for this clinic (effective only while the tenant is allowed)."""

    write_command = "waitlist_switch_set"

    @extend_schema(request=SwitchInput, responses={200: OpenApiResponse(description="{switch, tenant_group, policy}")})
    def post(self, request, clinic):
        def execute(_receipt):
            data = self.validated(SwitchInput)
            services.waitlist_switch_set(clinic=self.clinic, enabled=data["enabled"], actor=request.user,
                                         reason=data["reason"], idempotency_key=_key(request))
            return 200, _controls_body(self.clinic)

        return self.command("waitlist_switch_set", execute)


class WaitlistAllowlistView(_ControlsView):
    """ADMIN: put this clinic's tenant group on the rollout allowlist or take it off."""

    write_command = "waitlist_tenant_allow"

    @extend_schema(request=AllowlistInput,
                   responses={200: OpenApiResponse(description="{switch, tenant_group, policy}")})
    def post(self, request, clinic):
        def execute(_receipt):
            data = self.validated(AllowlistInput)
            services.waitlist_tenant_allow(clinic=self.clinic, allowed=data["allowed"], actor=request.user,
                                           reason=data["reason"],
                                           idempotency_key=_key(request))
            return 200, _controls_body(self.clinic)

        return self.command("waitlist_tenant_allow", execute)


class WaitlistPolicyView(_ControlsView):
    write_command = "policy_change"

    @extend_schema(responses={200: OpenApiResponse(description="{ref, version, digest, created_at, fields}")})
    def get(self, request, clinic):
        return Response(controls_snapshot(clinic=self.clinic)["policy_body"])

    @extend_schema(request=PolicyChangeInput,
                   responses={201: OpenApiResponse(description="the new version: {ref, version, digest, fields}")})
    def post(self, request, clinic):
        """ADMIN: publish a new policy version. 400 POLICY_UNCHANGED, 409 VERSION_CONFLICT."""

        def execute(_receipt):
            data = dict(self.validated(PolicyChangeInput))
            reason, expected = data.pop("reason"), data.pop("expected_version", None)
            policy = services.policy_change(clinic=self.clinic, actor=request.user, reason=reason, changes=data,
                                            expected_version=expected,
                                            idempotency_key=_key(request))
            return 201, policy_body(policy)

        return self.command("policy_change", execute)
