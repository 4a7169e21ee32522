"""Thin DRF views: CRM event intake (HMAC, no user auth) and the operations snapshot/redrive."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import ClinicAPIView, field_errors
from common.clientaddr import client_address
from common.errors import ValidationFailed
from common.middleware import body_too_large, declared_length
from reevaluation import selectors
from reevaluation.api.serializers import DrainInput, ReadoutQuery, RedriveInput, SnapshotQuery
from reevaluation.modes import readout as selectors_readout
from reevaluation.services import drain_set, event_intake, event_intake_oversized, redrive_execute, redrive_preview
from scheduling.models import Role
from scheduling.scoping import clinics_for_user, command_role


class _RawParser(BaseParser):
    """The signature covers the raw bytes, so the view reads ``request.body`` itself."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


class EventIntakeView(APIView):
    """POST /api/v1/events/patient-scheduling-assessment-changed: authenticated by HMAC, not by a user."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    parser_classes = [_RawParser]
    handles_oversized_body = True  # common.middleware leaves it to the view: a quarantine row is due

    @extend_schema(
        request=None,
        responses={
            202: OpenApiResponse(description='{status: "ACCEPTED", job}'),
            200: OpenApiResponse(description='{status: "DUPLICATE"}'),
            401: OpenApiResponse(description="SIGNATURE_INVALID"),
            400: OpenApiResponse(description="SCHEMA_INVALID"),
            413: OpenApiResponse(description="PAYLOAD_TOO_LARGE (quarantined)"),
            422: OpenApiResponse(description="SCOPE_INVALID, PRIVACY_BOUNDARY"),
        },
    )
    def post(self, request):
        source_address = client_address(request.META)
        if body_too_large(request):
            event_intake_oversized(size=declared_length(request), source_address=source_address)
        result = event_intake(body=request.body, headers=request.headers, source_address=source_address)
        if result.status == "DUPLICATE":
            return Response({"status": "DUPLICATE"}, status=200)
        return Response(
            {"status": "ACCEPTED", "job": result.job_ref, "job_state": result.job_state}, status=202
        )


def _validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise ValidationFailed("The request is not valid.", fields=field_errors(serializer.errors))
    return serializer.validated_data


class ProfileReevaluationOpsView(ClinicAPIView):
    """GET: STAFF snapshot of one clinic (``?clinic=``). POST (I): redrive PREVIEW (STAFF) and EXECUTE
    (ADMIN, ``scoping.COMMAND_ROLES``); the clinic ref is in the body."""

    def clinic_ref(self, request, kwargs) -> str | None:
        if request.method == "GET":
            self.query = _validated(SnapshotQuery, request.query_params)
            return self.query["clinic"]
        clinic_ref = request.data.get("clinic") if isinstance(request.data, dict) else None
        if not isinstance(clinic_ref, str) or not clinic_ref:
            raise ValidationFailed("The request is not valid.", fields={"clinic": ["A clinic ref is required."]})
        return clinic_ref

    def role_for(self, request) -> Role:
        if request.method == "GET":
            return Role.STAFF
        # ARCHITECTURE.md: "STAFF read and preview; ADMIN executes" (anything but PREVIEW is an EXECUTE).
        action = request.data.get("action") if isinstance(request.data, dict) else None
        return command_role("redrive_preview" if action == "PREVIEW" else "redrive_execute")

    @extend_schema(responses={200: OpenApiResponse(description="snapshot")})
    def get(self, request):
        query, clinic = self.query, self.clinic
        body = selectors.snapshot(clinic=clinic, queue_limit=query["limit"])
        if query.get("after"):
            body["action_queue"] = selectors.action_queue(clinic=clinic, limit=query["limit"], after=query["after"])
        return Response(body)

    @extend_schema(request=RedriveInput, responses={200: OpenApiResponse(description="preview or result")})
    def post(self, request):
        clinic, key = self.clinic, request.headers.get("Idempotency-Key") or ""

        def execute(_receipt):
            data = _validated(RedriveInput, request.data)
            if data["action"] == "PREVIEW":
                preview = redrive_preview(
                    clinic=clinic,
                    actor=request.user,
                    reason=data["reason"],
                    limit=data["limit"],
                    target_revision=data.get("target_revision"),
                    failure_classes=data.get("failure_classes"),
                    include_non_transient=data["include_non_transient"],
                    idempotency_key=key,
                )
                return 200, preview.as_body()
            result = redrive_execute(
                clinic=clinic,
                actor=request.user,
                preview_ref=data["preview"],
                reason=data["reason"],
                exclude=data["exclude"],
                confirm_non_transient=data["confirm_non_transient"],
                idempotency_key=key,
            )
            return 200, result.as_body()

        return self.command("reevaluation_redrive", execute)


class ReevaluationDrainView(ClinicAPIView):
    """POST (I), ADMIN with the operate grant: set the clinic's drain state (the console's Drain form). Resuming
    (``ACTIVE``) is how a clinic stopped by a privacy-boundary case or by repeated quarantine gets its consumer
    back; audited as ``reevaluation.drain_set``. 409 ``DRAIN_UNCHANGED``, ``DRAIN_TRANSITION_INVALID``,
    ``DRAIN_LEASES_ACTIVE``."""

    required_role = command_role("drain_set")

    def clinic_ref(self, request, kwargs) -> str | None:
        clinic_ref = request.data.get("clinic") if isinstance(request.data, dict) else None
        if not isinstance(clinic_ref, str) or not clinic_ref:
            raise ValidationFailed("The request is not valid.", fields={"clinic": ["A clinic ref is required."]})
        return clinic_ref

    @extend_schema(request=DrainInput,
                   responses={200: OpenApiResponse(description="{clinic, drain_state, drain_cause}")})
    def post(self, request):
        clinic, key = self.clinic, request.headers.get("Idempotency-Key") or ""

        def execute(_receipt):
            data = _validated(DrainInput, request.data)
            row = drain_set(clinic=clinic, state=data["state"], actor=request.user, reason=data["reason"],
                            idempotency_key=key)
            return 200, {"clinic": clinic.ref, "drain_state": row.drain_state, "drain_cause": row.drain_cause or None}

        return self.command("drain_set", execute)


class RollbackReadoutView(ClinicAPIView):
    """GET /api/v1/ops/profile-reevaluation/rollback?clinic=<ref>[&since=<ISO time>] (STAFF): the rollback
    invariants of one clinic, read from state and history (``selectors_readout``); without ``clinic``, of every
    clinic in the caller's scope (``{items: [...]}``). A clinic outside the scope is a 404 like a missing one."""

    def clinic_ref(self, request, kwargs) -> str | None:
        self.query = _validated(ReadoutQuery, request.query_params)
        return self.query.get("clinic")

    def initial(self, request, *args, **kwargs):
        if not request.query_params.get("clinic"):
            APIView.initial(self, request, *args, **kwargs)  # authentication, throttles: no one clinic
            self.query = _validated(ReadoutQuery, request.query_params)
            self.clinic = None  # every clinic in scope: see get()
            return
        super().initial(request, *args, **kwargs)

    @extend_schema(parameters=[ReadoutQuery], responses={200: OpenApiResponse(
        description="{clinic, ok, checks, mutation_mode, drain_state, active_leases, confirmed_changed, held_lost, "
                    "rows, jobs} (or {items: [...]} for every clinic in scope)")})
    def get(self, request):
        since = self.query.get("since")
        if self.clinic is not None:
            return Response(selectors_readout.rollback_readout(clinic=self.clinic, since=since))
        clinics = clinics_for_user(request.user).order_by("pk")[:200]
        return Response({"items": [selectors_readout.rollback_readout(clinic=c, since=since) for c in clinics]})


class ModeComparisonView(ClinicAPIView):
    """GET /api/v1/ops/profile-reevaluation/mode-comparison?clinic=<ref>[&since=…] (STAFF), read-only: the
    outcomes recorded under each mutation mode (recorded vs applied, per outcome), the mode changes in the
    window, and what APPLY_PROPOSED / APPLY_PROPOSED_AND_HELD would have applied of the DRY_RUN's would-be
    outcomes (``selectors_readout.mode_comparison``)."""

    def clinic_ref(self, request, kwargs) -> str | None:
        self.query = _validated(ReadoutQuery, request.query_params)
        clinic_ref = self.query.get("clinic")
        if not clinic_ref:
            raise ValidationFailed("The request is not valid.", fields={"clinic": ["A clinic ref is required."]})
        return clinic_ref

    @extend_schema(parameters=[ReadoutQuery], responses={200: OpenApiResponse(
        description="{clinic, since, current_mode, mode_changes, by_mode, dry_run_would_apply}")})
    def get(self, request):
        return Response(selectors_readout.mode_comparison(clinic=self.clinic, since=self.query.get("since")))
