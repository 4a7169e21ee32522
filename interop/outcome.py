"""Errors as FHIR ``OperationOutcome``: the API's typed refusal (code, detail, fields) in FHIR's words."""

from __future__ import annotations

from fhir.resources.R4B.operationoutcome import OperationOutcome

ERROR_SYSTEM = "urn:clinic-waitlist:error"
#: HTTP status → the issue type (R4 value set ``issue-type``) integrators branch on.
ISSUE_CODES = {
    400: "invalid", 401: "login", 403: "forbidden", 404: "not-found", 405: "not-supported",
    406: "not-supported", 409: "conflict", 412: "conflict", 413: "too-costly", 415: "not-supported",
    422: "processing", 429: "throttled",
}
#: Our codes whose FHIR issue type is more precise than the status's.
CODE_ISSUES = {"NOT_SUPPORTED": "not-supported", "SLOT_OCCUPIED": "conflict", "PATIENT_OVERLAP": "conflict",
               "VERSION_CONFLICT": "conflict"}


def _diagnostics(body: dict) -> str:
    text = str(body.get("detail") or body.get("code") or "Error")
    fields = body.get("fields")
    if isinstance(fields, dict) and fields:
        text += " (" + "; ".join(f"{name}: {_flat(messages)}" for name, messages in fields.items()) + ")"
    return text[:1000]


def _flat(value) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_flat(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_flat(v)}" for k, v in value.items())
    return str(value)


def from_error(status: int, body) -> OperationOutcome:
    """An OperationOutcome for an error answer ``body`` (the API's ``{code, detail, fields?}``)."""
    body = body if isinstance(body, dict) else {"detail": str(body)}
    code = str(body.get("code") or "ERROR")
    return OperationOutcome.model_validate({"issue": [{
        "severity": "error",
        "code": CODE_ISSUES.get(code) or ISSUE_CODES.get(status, "processing"),
        "details": {"coding": [{"system": ERROR_SYSTEM, "code": code}], "text": code},
        "diagnostics": _diagnostics(body),
    }]})
