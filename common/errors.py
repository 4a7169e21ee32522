"""Typed domain errors. Services raise them; the API and pages render them (API.md "Errors")."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A refusal with a stable upper-snake code; nothing was changed when it is raised."""

    status_code = 400
    code = "VALIDATION_ERROR"

    def __init__(self, detail: str | None = None, *, code: str | None = None, fields: dict | None = None):
        self.code = code or self.code
        self.detail = detail or self.code.replace("_", " ").capitalize()
        self.fields = fields
        super().__init__(f"{self.code}: {self.detail}")

    def as_body(self) -> dict:
        body: dict[str, Any] = {"code": self.code, "detail": self.detail}
        if self.fields:
            body["fields"] = self.fields
        return body


class ValidationFailed(DomainError):
    status_code = 400
    code = "VALIDATION_ERROR"


class NotFound(DomainError):
    """Missing and out-of-scope look exactly alike."""

    status_code = 404
    code = "NOT_FOUND"

    def __init__(self, detail: str | None = None, **kwargs):
        super().__init__(detail or "Not found.", **kwargs)


class PermissionDenied(DomainError):
    status_code = 403
    code = "PERMISSION_DENIED"


class Conflict(DomainError):
    """A state conflict (409): the caller's picture of the world is out of date or the slot is gone."""

    status_code = 409
    code = "CONFLICT"


class VersionConflict(Conflict):
    code = "VERSION_CONFLICT"


class SlotOccupied(Conflict):
    code = "SLOT_OCCUPIED"


class PatientOverlap(SlotOccupied):
    """The patient already holds or has booked a time that overlaps this one (the slot itself may be free)."""

    code = "PATIENT_OVERLAP"


class ConsentOptedOut(Conflict):
    """Granting a channel the patient opted out of themselves needs their new consent (source
    PATIENT_CONSENT with evidence); staff cannot re-grant it on their own."""

    code = "CONSENT_OPTED_OUT"


class PatientDuplicate(Conflict):
    """A patient with the same email, phone or CRM fingerprint exists in the clinic (``fields.existing``)."""

    code = "PATIENT_DUPLICATE"


class EntryDuplicate(Conflict):
    """The patient already has a live entry (WAITING, OFFERED, ACCEPTED) for the treatment whose window
    overlaps this one (``fields.existing``)."""

    code = "ENTRY_DUPLICATE"


def constraint_violated(exc: BaseException) -> str:
    """The name of the PostgreSQL constraint an IntegrityError broke ('' when it does not say)."""
    diag = getattr(getattr(exc, "__cause__", None), "diag", None)
    return getattr(diag, "constraint_name", "") or ""


class IdempotencyKeyReused(DomainError):
    status_code = 422
    code = "IDEMPOTENCY_KEY_REUSED"


class Unprocessable(DomainError):
    status_code = 422
    code = "UNPROCESSABLE"


class PayloadTooLarge(DomainError):
    """The body is over the endpoint's (or the server's) size limit; it was not read."""

    status_code = 413
    code = "PAYLOAD_TOO_LARGE"


class PhoneInvalid(DomainError):
    """A phone number that cannot be read as a number of the clinic's country (or as ``+<country code>…``)."""

    status_code = 400
    code = "PHONE_INVALID"
