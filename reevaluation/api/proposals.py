"""Thin DRF views of reevaluation proposals (issue 28): list and detail (STAFF), an operator's confirmation
(the atomic swap of a CONFIRMED appointment the patient chose to change) and rejection. Roles come from
``scheduling.scoping.COMMAND_ROLES``; writes are (I) commands stored per Idempotency-Key."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from common.api import ClinicAPIView, field_errors
from common.errors import ValidationFailed
from common.schema import OPERATION_ERRORS
from reevaluation.proposals import selectors as selectors_proposals
from reevaluation.proposals.models import ProposalState
from reevaluation.proposals.services import proposal_confirm, proposal_reject
from scheduling.scoping import command_role

TAGS = ["reevaluation"]

# The typed refusals of these operations, in the schema's registry (kept here, beside the views, so the shared
# ``common/schema.py`` stays untouched; the registry is read when the schema is generated).
OPERATION_ERRORS.update({
    "ProposalConfirmView.post": {409: ("PROPOSAL_NOT_CONFIRMABLE", "PROPOSAL_ALREADY_APPLIED", "PROPOSAL_EXPIRED",
                                       "SLOT_OCCUPIED", "PATIENT_OVERLAP", "APPOINTMENT_CHANGED", "HOLD_NOT_LIVE")},
    "ProposalRejectView.post": {409: ("PROPOSAL_ENDED",)},
})


class ProposalListQuery(serializers.Serializer):
    state = serializers.MultipleChoiceField(choices=ProposalState.choices, required=False)
    appointment = serializers.CharField(max_length=40, required=False, help_text="the proposals about or producing it")
    limit = serializers.IntegerField(min_value=1, max_value=200, required=False, default=50)


class ProposalDecisionInput(serializers.Serializer):
    """``actor`` is not a field: the operator is the authenticated user."""

    reason = serializers.CharField(min_length=5, max_length=500)


class ProposalListView(ClinicAPIView):
    """GET /api/v1/clinics/{clinic}/reevaluation/proposals (STAFF): live proposals, or ``?state=`` (repeatable)."""

    @extend_schema(
        tags=TAGS,
        operation_id="v1_clinics_reevaluation_proposals_list",
        parameters=[
            OpenApiParameter("state", {"type": "array", "items": {"type": "string", "enum": ProposalState.values}},
                             description="states to list (default: OPEN, CALL_REQUESTED, ACCEPTED)", explode=True),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}),
            OpenApiParameter("appointment", {"type": "string", "maxLength": 40},
                             description="an appointment ref: every proposal about it or that produced it"),
        ],
        responses={200: OpenApiResponse(description="{items: [proposal]}")},
    )
    def get(self, request, clinic):
        params = {"state": request.query_params.getlist("state"), "limit": request.query_params.get("limit", 50)}
        if "appointment" in request.query_params:
            params["appointment"] = request.query_params["appointment"]
        query = ProposalListQuery(data=params)
        if not query.is_valid():
            raise ValidationFailed("The query is not valid.", fields=field_errors(query.errors))
        data = query.validated_data
        if data.get("appointment"):
            # "Why did this appointment move?" from the appointment's end.
            return Response({"items": selectors_proposals.proposals_for_appointment(
                clinic=self.clinic, appointment_ref=data["appointment"])})
        items = selectors_proposals.proposal_list(clinic=self.clinic, states=data.get("state"), limit=data["limit"])
        return Response({"items": items})


class ProposalDetailView(ClinicAPIView):
    """GET …/reevaluation/proposals/{ref} (STAFF): options and holds, consent evidence, outcome and assessment
    links. A ref of another clinic is a 404 like a missing one."""

    @extend_schema(tags=TAGS, responses={200: OpenApiResponse(description="proposal with options, consents, outcomes")})
    def get(self, request, clinic, ref):
        return Response(selectors_proposals.proposal_detail(clinic=self.clinic, proposal_ref=ref))


class _DecisionView(ClinicAPIView):
    service = staticmethod(proposal_confirm)

    def execute_for(self, request, ref):
        def execute(_receipt):
            data = self.validated(ProposalDecisionInput)
            proposal = type(self).service(clinic=self.clinic, proposal_ref=ref, actor=request.user,
                                          reason=data["reason"],
                                          idempotency_key=request.headers.get("Idempotency-Key") or "")
            return 200, selectors_proposals.proposal_detail(clinic=self.clinic, proposal_ref=proposal.ref)

        return execute


class ProposalConfirmView(_DecisionView):
    """POST …/proposals/{ref}/confirm (I), role ``proposal_confirm``: swap the CONFIRMED appointment for the time
    the patient accepted, atomically, and audit it. 409 PROPOSAL_NOT_CONFIRMABLE, PROPOSAL_ALREADY_APPLIED,
    PROPOSAL_EXPIRED, SLOT_OCCUPIED, APPOINTMENT_CHANGED (nothing changed)."""

    required_role = command_role("proposal_confirm")
    service = staticmethod(proposal_confirm)

    @extend_schema(tags=TAGS, request=ProposalDecisionInput,
                   responses={200: OpenApiResponse(description="the proposal, APPLIED, with result_appointment")})
    def post(self, request, clinic, ref):
        return self.command("reevaluation_proposal_confirm", self.execute_for(request, ref))


class ProposalRejectView(_DecisionView):
    """POST …/proposals/{ref}/reject (I), role ``proposal_reject``: decline a live proposal; its holds are released
    and the appointment stays as it was. 409 PROPOSAL_ENDED."""

    required_role = command_role("proposal_reject")
    service = staticmethod(proposal_reject)

    @extend_schema(tags=TAGS, request=ProposalDecisionInput,
                   responses={200: OpenApiResponse(description="the proposal, REJECTED")})
    def post(self, request, clinic, ref):
        return self.command("reevaluation_proposal_reject", self.execute_for(request, ref))
