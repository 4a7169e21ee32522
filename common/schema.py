"""The OpenAPI schema's shared parts, added in one place so no view repeats them (docs/api.md "API docs").

``AppAutoSchema`` (REST_FRAMEWORK DEFAULT_SCHEMA_CLASS) tags every operation with its app, documents the
``Idempotency-Key`` header on the (I) commands, adds the typed error answers each operation can give (the
``Error`` component, one example per code) and gives the main commands typed success bodies. What the
views cannot tell by themselves lives in the registries below, keyed ``"ViewClass.method"``.
"""

from __future__ import annotations

from django.utils.module_loading import import_string
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS, AllowAny

from .api import ClinicAPIView  # the (I) commands' base (self.command)

#: First module part of a view → its tag. Ops reads and commands are tagged ``operations`` too.
APP_TAGS = {
    "config": "discovery",
    "scheduling": "scheduling",
    "waitlist": "waitlist",
    "reevaluation": "reevaluation",
    "operations": "operations",
    "interop": "fhir",
    "observability": "observability",
}

IDEMPOTENCY_DESCRIPTION = (
    "Optional, 1–200 printable ASCII characters (else 400 `VALIDATION_ERROR`). The first answer is stored "
    "per (clinic, user, key); a replay of the same request returns the same status and body with "
    "`Idempotent-Replayed: true` and changes nothing; the same key with a different request is 422 "
    "`IDEMPOTENCY_KEY_REUSED`. Validation failures and typed conflicts are stored and replayed too; an "
    "unexpected server error stores nothing, so the key can be retried."
)

#: What ``common.idempotency.validate_key`` accepts: 1–200 printable ASCII characters (space to tilde).
IDEMPOTENCY_KEY_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[ -~]{1,200}$"}

#: POST commands outside ``ClinicAPIView`` that run under the key, and ClinicAPIView POSTs that do not.
IDEMPOTENT_EXTRA = {"ProfileReevaluationOpsView.post", "JoinRequestCreateView.post"}
NOT_IDEMPOTENT = {"VacancyDispatchView.post"}

#: Query serializers of reads whose view does not declare them (documentation only).
QUERY_PARAMETERS = {"ProfileReevaluationOpsView.get": "reevaluation.api.serializers.SnapshotQuery"}

#: Typed refusals an operation can answer beyond the common ones derived in ``_error_codes``.
OPERATION_ERRORS: dict[str, dict[int, tuple[str, ...]]] = {
    "AppointmentCreateView.post": {409: ("SLOT_OCCUPIED", "PATIENT_OVERLAP")},
    "AppointmentCancelView.post": {409: ("APPOINTMENT_NOT_CANCELLABLE", "VERSION_CONFLICT")},
    "EntryCreateView.post": {403: ("PERMISSION_DENIED",)},
    # The public join contract (waitlist.joining.api; docs/api.md "Public join contract").
    "JoinRequestCreateView.post": {400: ("TREATMENT_NOT_OFFERED", "PHONE_INVALID", "CAPTCHA_FAILED"),
                                   403: ("ORIGIN_NOT_ALLOWED",)},
    "JoinRequestVerifyView.post": {400: ("CODE_INVALID",), 403: ("ORIGIN_NOT_ALLOWED",), 409: ("REQUEST_VERIFIED",),
                                   410: ("CODE_EXPIRED",), 429: ("CODE_EXHAUSTED",)},
    "JoinRequestResendView.post": {403: ("ORIGIN_NOT_ALLOWED",), 409: ("REQUEST_VERIFIED",),
                                   429: ("CODE_RESEND_LIMITED",)},
    "EntryPriorityView.post": {409: ("ENTRY_CLOSED", "VERSION_CONFLICT")},
    "EntryWithdrawView.post": {409: ("ENTRY_NOT_WITHDRAWABLE", "VERSION_CONFLICT")},
    "OfferClaimView.post": {409: ("OFFER_EXPIRED", "VERSION_CONFLICT", "SLOT_OCCUPIED", "PATIENT_OVERLAP",
                                  "DECISION_STALE", "OFFER_NOT_CLAIMABLE")},
    "OfferLateAcceptView.post": {409: ("LATE_ACCEPT_OFF", "OFFER_NOT_EXPIRED", "LATE_ACCEPT_NOT_APPLICABLE",
                                       "SLOT_TOO_SOON", "SLOT_OFFERED", "SLOT_GONE", "ENTRY_NOT_WAITING",
                                       "NOT_ELIGIBLE", "DECISION_STALE", "WAITLIST_DISABLED")},
    "OfferDeclineView.post": {409: ("OFFER_NOT_DECLINABLE", "OFFER_EXPIRED", "VERSION_CONFLICT")},
    "OfferWithdrawView.post": {409: ("OFFER_NOT_WITHDRAWABLE", "VERSION_CONFLICT")},
    "HoldBookView.post": {409: ("HOLD_NOT_BOOKABLE",)},
    "HoldRetryBookingView.post": {409: ("HOLD_NOT_BOOKABLE",)},
    "VacancyCloseView.post": {409: ("VACANCY_NOT_CLOSABLE",)},
    "VacancyReopenView.post": {409: ("VACANCY_NOT_REOPENABLE", "VACANCY_STARTED")},
    "VacancyReviewView.post": {409: ("VACANCY_NOT_IN_REVIEW", "VERSION_CONFLICT", "VACANCY_STARTED",
                                     "CANDIDATE_INELIGIBLE", "ALREADY_OFFERED", "POLICY_CHANGED")},
    "ShadowPolicyView.post": {401: ("TOKEN_EXPIRED",), 409: ("SHADOW_EXISTS",)},
    "ShadowDecideView.post": {409: ("SHADOW_NOT_ACTIVE",)},
    "WaitlistSwitchView.post": {401: ("TOKEN_EXPIRED",)},
    "WaitlistAllowlistView.post": {401: ("TOKEN_EXPIRED",)},
    "WaitlistPolicyView.post": {401: ("TOKEN_EXPIRED",), 400: ("POLICY_UNCHANGED",), 409: ("VERSION_CONFLICT",)},
    # ``?clinic=`` / body ``clinic`` scoped: out of scope is 404 like a missing clinic.
    "WaitlistOpsView.get": {403: ("PERMISSION_DENIED",), 404: ("NOT_FOUND",)},
    "ProfileReevaluationOpsView.get": {403: ("PERMISSION_DENIED",), 404: ("NOT_FOUND",)},
    "ProfileReevaluationOpsView.post": {401: ("TOKEN_EXPIRED",), 403: ("PERMISSION_DENIED",),
                                        404: ("NOT_FOUND",), 409: ("PREVIEW_USED", "PREVIEW_EXPIRED")},
    "EventIntakeView.post": {400: ("SCHEMA_INVALID",), 401: ("SIGNATURE_INVALID",), 413: ("PAYLOAD_TOO_LARGE",),
                             422: ("SCOPE_INVALID", "PRIVACY_BOUNDARY", "EVENT_ID_REUSED")},
}

STATUS_TITLES = {400: "Bad request", 401: "Not authenticated", 403: "Forbidden", 404: "Not found",
                 409: "State conflict", 413: "Body too large", 415: "Unsupported media type",
                 410: "Gone", 422: "Unprocessable", 429: "Throttled"}

ERROR_SCHEMA = {
    "type": "object",
    "description": "Every refusal (docs/api.md \"Conventions\"); nothing was changed.",
    "properties": {
        "code": {"type": "string", "description": "stable UPPER_SNAKE code", "example": "NOT_FOUND"},
        "detail": {"type": "string", "description": "human text"},
        "fields": {
            "type": "object",
            "description": "VALIDATION_ERROR only: the messages per field (nested for nested input)",
            "additionalProperties": {},
        },
    },
    "required": ["code", "detail"],
}


# --- typed success bodies (the shapes the views build; documentation only) ---

def _ref(**kw):
    return serializers.CharField(**kw)


def _nullable_ref(help_text: str = ""):
    return serializers.CharField(allow_null=True, help_text=help_text)


APPOINTMENT = inline_serializer("Appointment", {
    "ref": _ref(), "status": _ref(), "version": serializers.IntegerField(),
    "starts_at": serializers.DateTimeField(), "ends_at": serializers.DateTimeField(),
    "patient": _ref(), "practitioner": _ref(), "treatment": _ref(), "resource": _nullable_ref(),
})
ENTRY = inline_serializer("WaitlistEntry", {
    "ref": _ref(), "status": _ref(), "version": serializers.IntegerField(),
    "waiting_since": serializers.DateTimeField(), "patient": _ref(), "treatment": _ref(),
    "practitioner": _nullable_ref(), "earliest": serializers.DateTimeField(), "latest": serializers.DateTimeField(),
    "priority_rank": serializers.IntegerField(), "resource_kind": serializers.CharField(),
    "asked_last_since": serializers.DateTimeField(
        allow_null=True, help_text="since when the patient is asked after every other candidate (their last offers "
        "went unanswered, the policy's unanswered_ask_last_after); null: in their place"),
})


def _page(name: str, item) -> serializers.Serializer:
    return inline_serializer(name, {
        "items": type(item)(many=True),
        "next": _nullable_ref("pass as ?after= for the following page; null on the last page"),
    })


REFERENCE = inline_serializer("Reference", {
    "ref": _ref(), "name": serializers.CharField(),
    "duration_minutes": serializers.IntegerField(required=False, help_text="treatments only"),
}, many=True)
CONSENT = inline_serializer("PatientConsent", {
    "patient": _ref(),
    "current": serializers.DictField(help_text="{EMAIL, SMS}: each channel's current state"),
    "history": serializers.ListField(child=serializers.DictField(),
                                     help_text="newest 50: {ref, channel, state, source, actor, recorded_at}"),
})

SUCCESS_BODIES = {
    "ClinicListView.get": inline_serializer("Clinic", {
        "ref": _ref(), "name": serializers.CharField(), "tenant_group": _ref(), "timezone": serializers.CharField(),
    }, many=True),
    "PractitionerListView.get": REFERENCE,
    "TreatmentListView.get": REFERENCE,
    "ResourceListView.get": REFERENCE,
    "PatientConsentView.get": CONSENT,
    "PatientConsentView.post": CONSENT,
    "ShadowPolicyView.post": inline_serializer("ShadowPublished", {
        "ref": _ref(), "status": _ref(), "changes": serializers.DictField(), "correlation_id": _ref(),
    }),
    "ShadowDecideView.post": inline_serializer("ShadowDecided", {
        "ref": _ref(), "status": _ref(help_text="PROMOTED or DISCARDED"),
        "policy_version": serializers.IntegerField(allow_null=True, help_text="the new enforced version; null "
                                                                              "on discard"),
        "correlation_id": _ref(),
    }),
    "AppointmentCreateView.get": _page("AppointmentPage", APPOINTMENT),
    "AppointmentCreateView.post": APPOINTMENT,
    "AppointmentDetailView.get": APPOINTMENT,
    "AppointmentCancelView.post": inline_serializer("AppointmentCancelled", {
        "status": _ref(), "version": serializers.IntegerField(),
        "vacancy": _nullable_ref("the vacancy this cancellation opened, if any"),
    }),
    "EntryCreateView.get": _page("WaitlistEntryPage", ENTRY),
    "EntryCreateView.post": ENTRY,
    "EntryDetailView.get": ENTRY,
    "EntryPriorityView.post": ENTRY,
    "EntryWithdrawView.post": ENTRY,
    "PatientCreateView.post": inline_serializer("PatientCreated", {"ref": _ref()}),
    "VacancyDispatchView.post": inline_serializer("DispatchResult", {
        "outcome": serializers.ChoiceField(choices=["OFFERED", "BOOKED", "ALREADY_OFFERED", "NO_CANDIDATE",
                                                    "STAFF_REVIEW", "WAITING", "DISABLED", "CLOSED"]),
        "offer": _nullable_ref(),
    }),
    "OfferClaimView.post": inline_serializer("ClaimReceipt", {
        "status": _ref(help_text="ACCEPTED"), "offer": _ref(), "version": serializers.IntegerField(),
        "hold": _ref(), "hold_expires_at": serializers.DateTimeField(), "receipt": _ref(),
        "appointment": _nullable_ref("null until the hold is booked (POST …/holds/{ref}/book)"),
    }),
    "OfferLateAcceptView.post": inline_serializer("LateAccept", {
        "offer": _ref(help_text="the new offer (ACCEPTED), or the ended one while the yes is kept"),
        "renews": _ref(help_text="the offer that ended unanswered"),
        "status": _ref(help_text="ACCEPTED, or KEPT while the time is offered to someone else"),
        "hold": _nullable_ref(), "hold_expires_at": serializers.DateTimeField(allow_null=True),
        "receipt": _nullable_ref("the claim receipt (null on a repeat or while the yes is kept)"),
        "appointment": _nullable_ref("the CONFIRMED appointment under confirmation=ON_ACCEPT, else null"),
    }),
    "OfferDeclineView.post": (offer_closed := inline_serializer("OfferClosed", {
        "status": _ref(), "version": serializers.IntegerField(), "reason_code": _ref(),
        "decline_reason": serializers.CharField(allow_blank=True),
    })),
    "OfferWithdrawView.post": offer_closed,
    "HoldBookView.post": inline_serializer("Booked", {"appointment": _ref(), "status": _ref(help_text="CONFIRMED")}),
    "HoldRetryBookingView.post": inline_serializer("BookingRetried", {
        "appointment": _ref(), "status": _ref(), "correlation_id": _ref(),
    }),
    "DecisionFeedView.post": inline_serializer("DecisionRecorded", {
        "ref": _ref(), "decision_ref": _ref(), "status": _ref(help_text="FRESH, STALE or UNAVAILABLE"),
    }),
    "OfferDetailView.get": inline_serializer("Offer", {
        "ref": _ref(), "status": _ref(), "version": serializers.IntegerField(),
        "expires_at": serializers.DateTimeField(), "vacancy": _ref(), "entry": _ref(), "hold": _ref(),
        "hold_status": _ref(), "appointment": _nullable_ref("the booked appointment, null until booked"),
        "policy_version": serializers.IntegerField(), "policy_digest": _ref(), "decision_ref": _ref(allow_blank=True),
        "decision_status": _ref(help_text="FRESH, STALE, UNAVAILABLE or NOT_USED"),
        "decision_expires_at": serializers.DateTimeField(allow_null=True), "reason_code": _ref(allow_blank=True),
        "decline_reason": serializers.CharField(allow_blank=True),
        "notified_at": serializers.DateTimeField(allow_null=True),
        "standing": serializers.BooleanField(help_text="booked at once under the patient's standing acceptance"),
        "release_until": serializers.DateTimeField(allow_null=True, help_text="a standing booking's release deadline"),
        "renews": _nullable_ref("a late accept: the patient's offer of this vacancy that ended unanswered"),
    }),
    "VacancyDetailView.get": inline_serializer("Vacancy", {
        "ref": _ref(), "status": _ref(), "version": serializers.IntegerField(), "active_offer": _nullable_ref(),
        "starts_at": serializers.DateTimeField(), "ends_at": serializers.DateTimeField(), "practitioner": _ref(),
        "treatment": _ref(), "resource": _nullable_ref(),
        "waiting": serializers.DictField(allow_null=True, help_text="{reason: QUIET_HOURS|CONTACT_CAP, until}"),
    }),
    "VacancyReviewView.post": inline_serializer("VacancyReviewed", {
        "status": _ref(), "version": serializers.IntegerField(),
        "resolution": serializers.ChoiceField(choices=["PROMOTE", "SKIP"]), "outcome": _ref(),
        "offer": _nullable_ref(), "reviewed_entry": _nullable_ref(), "correlation_id": _ref(),
    }),
    "EventIntakeView.post": inline_serializer("EventAccepted", {
        "status": _ref(help_text="ACCEPTED"), "job": _ref(), "job_state": _ref(),
    }),
    "VacancyCloseView.post": inline_serializer("VacancyClosed", {
        "status": _ref(), "version": serializers.IntegerField(), "withdrawn_offer": _nullable_ref(),
        "correlation_id": _ref(),
    }),
    "VacancyReopenView.post": inline_serializer("VacancyReopened", {
        "status": _ref(), "version": serializers.IntegerField(), "correlation_id": _ref(),
    }),
    # PREVIEW and EXECUTE answer different fields: all optional but the count.
    "ProfileReevaluationOpsView.post": inline_serializer("RedriveAnswer", {
        "preview": _ref(required=False, help_text="PREVIEW: the ref EXECUTE takes"),
        "targets": serializers.ListField(child=serializers.DictField(), required=False,
                                         help_text="PREVIEW: the frozen jobs"),
        "count": serializers.IntegerField(help_text="PREVIEW: jobs selected; EXECUTE: jobs redriven"),
        "failure_classes": serializers.ListField(child=serializers.CharField(), required=False,
                                                 help_text="PREVIEW"),
        "class_counts": serializers.DictField(child=serializers.IntegerField(), required=False, help_text="PREVIEW"),
        "includes_non_transient": serializers.BooleanField(required=False, help_text="PREVIEW"),
        "expires_at": serializers.DateTimeField(allow_null=True, required=False, help_text="PREVIEW"),
        "lifetime_seconds": serializers.IntegerField(required=False, help_text="PREVIEW"),
        "redriven": serializers.ListField(child=serializers.DictField(), required=False, help_text="EXECUTE"),
        "skipped": serializers.ListField(child=serializers.DictField(), required=False, help_text="EXECUTE"),
        "excluded": serializers.ListField(child=serializers.DictField(), required=False, help_text="EXECUTE"),
        "skipped_count": serializers.IntegerField(required=False, help_text="EXECUTE"),
    }),
}


class ClinicRefFieldExtension(OpenApiSerializerFieldExtension):
    """A body ref inside the request's clinic: a string (missing or foreign is 400 on that field)."""

    target_class = "common.api.fields.ClinicRefField"

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "string", "minLength": 1, "maxLength": 40, "pattern": REF_PATTERN,
                "description": f"ref of a {self.target.model.__name__} in this clinic"}


#: A ref as ``scheduling.scoping`` accepts one (printable ASCII, no spaces); a NUL-free string otherwise.
REF_PATTERN = "^[!-~]{1,40}$"
NO_NUL_PATTERN = "^[^\\x00]*$"
NOT_BLANK_PATTERN = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"


class AppAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema plus the shared parts; views keep their own ``extend_schema``."""

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        """A request string states what the server enforces (issue 26): not blank unless allowed (1 character
        at least), no NUL (common/textguard.py), so a schema-valid request is not refused for either."""
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction == "request" and isinstance(field, serializers.CharField) and schema.get("type") == "string":
            if "pattern" not in schema and "enum" not in schema and "format" not in schema:
                # Trimmed and not blank: one character other than white space at least (" " or "\u00a0" is "").
                blank_ok = field.allow_blank or not getattr(field, "trim_whitespace", True)
                schema["pattern"] = NO_NUL_PATTERN if blank_ok else NOT_BLANK_PATTERN
            if not field.allow_blank:
                schema["minLength"] = max(int(schema.get("minLength", 0)), 1)
        if direction == "request" and isinstance(field, serializers.DictField) and not field.allow_empty:
            schema["minProperties"] = 1
        return schema

    def _map_basic_serializer(self, serializer, direction):
        """A request body names its fields only: an unknown field is ignored at best and refused by some
        commands (the policy's "Not an editable policy field"), so the schema allows none."""
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and schema.get("properties"):
            schema["additionalProperties"] = False
        return schema

    def _key(self) -> str:
        return f"{type(self.view).__name__}.{self.method.lower()}"

    def get_tags(self) -> list[str]:
        tags = [APP_TAGS.get(type(self.view).__module__.split(".")[0], "discovery")]
        if "/ops/" in self.path and "operations" not in tags:
            tags.append("operations")
        return tags

    def get_operation_id(self) -> str:
        """A collection GET (path ends in ``/``) is ``…_list``; its member GET keeps ``…_retrieve``."""
        operation_id = super().get_operation_id()
        if self.method == "GET" and self.path.endswith("/") and operation_id.endswith("_retrieve"):
            operation_id = operation_id.removesuffix("_retrieve") + "_list"
        return operation_id

    def is_idempotent(self) -> bool:
        key = self._key()
        if key in IDEMPOTENT_EXTRA:
            return True
        return self.method == "POST" and isinstance(self.view, ClinicAPIView) and key not in NOT_IDEMPOTENT

    def get_override_parameters(self):
        parameters = list(super().get_override_parameters())
        if self._key() in QUERY_PARAMETERS:
            parameters.append(import_string(QUERY_PARAMETERS[self._key()]))
        if self.is_idempotent():
            parameters.append(OpenApiParameter(
                "Idempotency-Key", IDEMPOTENCY_KEY_SCHEMA, OpenApiParameter.HEADER, description=IDEMPOTENCY_DESCRIPTION,
            ))
            parameters.append(OpenApiParameter(
                "Idempotent-Replayed", OpenApiTypes.STR, OpenApiParameter.HEADER, response=True,
                enum=["true"], description="Present on a replayed answer (the stored status and body).",
            ))
        return parameters

    def _get_response_bodies(self, direction="response"):
        """Swap a success answer declared only by description for its typed body (``SUCCESS_BODIES``)."""
        bodies = super()._get_response_bodies(direction)
        body = SUCCESS_BODIES.get(self._key())
        success = [status for status in bodies if status.startswith("2")]
        if body is not None and direction == "response" and success:
            status = success[0]
            typed = OpenApiResponse(body, description=bodies[status].get("description", ""))
            bodies[status] = self._get_response_for_code(typed, status, direction=direction)
        return bodies

    def _error_codes(self, operation: dict) -> dict[int, list[str]]:
        """The refusals this operation can answer: the common ones by its shape, then the registry's."""
        view, write = self.view, self.method not in SAFE_METHODS
        codes: dict[int, list[str]] = {}

        def add(status: int, *names: str) -> None:
            codes.setdefault(status, [])
            codes[status] += [n for n in names if n not in codes[status]]

        open_to_anyone = any(p is AllowAny for p in getattr(view, "permission_classes", []))
        if not open_to_anyone:
            add(401, "NOT_AUTHENTICATED")
        if write and getattr(view, "required_role", None) == "ADMIN":
            add(401, "TOKEN_EXPIRED")
        if "{clinic}" in self.path:
            add(403, "PERMISSION_DENIED")
            add(404, "NOT_FOUND")
        if "{ref}" in self.path or "{resource_id}" in self.path:
            add(404, "NOT_FOUND")
        if write or any(p.get("in") == "query" for p in operation.get("parameters", [])):
            add(400, "VALIDATION_ERROR")
        if write and not open_to_anyone:
            add(413, "PAYLOAD_TOO_LARGE")
            add(415, "UNSUPPORTED_MEDIA_TYPE")
        if self.is_idempotent():
            add(422, "IDEMPOTENCY_KEY_REUSED")
        for status, names in OPERATION_ERRORS.get(self._key(), {}).items():
            add(status, *names)
        add(429, "THROTTLED")
        return codes

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        self.registry.register_on_missing(ResolvedComponent(
            name="Error", type=ResolvedComponent.SCHEMA, object="Error", schema=ERROR_SCHEMA,
        ))
        error_ref = {"$ref": "#/components/schemas/Error"}
        for status, names in sorted(self._error_codes(operation).items()):
            declared = operation["responses"].get(str(status), {})
            examples = [OpenApiExample(name, value={"code": name, "detail": "…"}, response_only=True,
                                       status_codes=[str(status)]) for name in names]
            description = f"{STATUS_TITLES.get(status, 'Refused')}: {', '.join(f'`{n}`' for n in names)}"
            if declared.get("description") and declared["description"] not in names:
                description += f". {declared['description']}"
            answer = OpenApiResponse(error_ref, description=description, examples=examples)
            operation["responses"][str(status)] = self._get_response_for_code(answer, str(status))
        return operation


def _probe(summary: str, answers: dict, security: list | None = None) -> dict:
    operation = {"operationId": summary.split(":")[0], "summary": summary, "tags": ["observability"],
                 "responses": answers}
    if security is not None:
        operation["security"] = security
    return {"get": operation}


def _text(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"type": "object"}}}}


def add_observability_paths(result, generator, request, public):
    """POSTPROCESSING_HOOKS: the probe and metrics are plain Django views (outside DRF); document them anyway.
    ``/readyz`` stays out: its 503 (a dependency down) would read as a server error to the schema fuzzer;
    docs/api.md and docs/deployment.md describe it."""
    result["paths"].update({
        "/healthz": _probe("healthz: the process answers (touches nothing)",
                           {"200": _text('{"status": "ok"}')}, security=[]),
        "/metrics": _probe(
            "metrics: Prometheus text format (Authorization: Bearer <scrape token>)",
            {"200": {"description": "Prometheus text format",
                     "content": {"text/plain": {"schema": {"type": "string"}}}},
             "401": {"description": "No or a wrong scrape token: a bare `unauthorized` (text/plain)",
                     "content": {"text/plain": {"schema": {"type": "string"}}}}},
            security=[{"scrapeToken": []}],
        ),
    })
    result.setdefault("components", {}).setdefault("securitySchemes", {})["scrapeToken"] = {
        "type": "http", "scheme": "bearer", "description": "the metrics scrape token (docs/deployment.md)",
    }
    return result
