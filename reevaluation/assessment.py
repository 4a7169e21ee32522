"""The CRM assessment client and the assessment document contract (docs/reevaluation.md).

The document names scheduling constraints only. Its SHA-256 over the canonical JSON form
(sorted keys, no spaces, UTF-8) must equal the event's ``assessmentHash``, and its
``profileRevision`` must equal the event's. Anything beyond the contract's fields is treated as
raw profile data crossing the boundary (PRIVACY_BOUNDARY). Nothing from a response is logged.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import requests
from django.conf import settings

DOCUMENT_KEYS = frozenset(
    {"assessmentRef", "profileRevision", "policyRef", "policyGeneration", "constraints"}
)
CONSTRAINT_KEYS = frozenset(
    {"requiredPractitioner", "allowedTreatments", "minimumSlotMinutes", "resourceNeed"}
)
_REF = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")


class AssessmentError(Exception):
    """A failure with a bounded code; ``transient`` ones go to RETRY_WAIT, the rest to quarantine."""

    transient = False

    def __init__(self, code: str, evidence: bytes = b""):
        super().__init__(code)
        self.code = code
        self.evidence_digest = hashlib.sha256(evidence).hexdigest()
        self.evidence_size = len(evidence)


class AssessmentTransient(AssessmentError):
    transient = True


@dataclass(frozen=True)
class Constraints:
    required_practitioner: str | None = None
    allowed_treatments: tuple[str, ...] | None = None
    minimum_slot_minutes: int | None = None
    resource_need: str | None = None


@dataclass(frozen=True)
class Assessment:
    assessment_ref: str
    profile_revision: int
    policy_ref: str
    policy_generation: int
    constraints: Constraints


def canonical(document: dict) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def document_hash(document: dict) -> str:
    return hashlib.sha256(canonical(document)).hexdigest()


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_document(
    raw: bytes, *, expected_hash: str, expected_revision: int, assessment_ref: str
) -> Assessment:
    """Check privacy, integrity, contract and revision, in that order; raise AssessmentError."""
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        raise AssessmentError("ASSESSMENT_CONTRACT_INVALID", raw) from None
    if not isinstance(document, dict):
        raise AssessmentError("ASSESSMENT_CONTRACT_INVALID", raw)
    constraints: Any = document.get("constraints")
    extra = set(document) - DOCUMENT_KEYS
    if isinstance(constraints, dict):
        extra |= set(constraints) - CONSTRAINT_KEYS
    if extra:
        raise AssessmentError("PRIVACY_BOUNDARY", raw)
    if document_hash(document) != expected_hash:
        raise AssessmentError("ASSESSMENT_HASH_MISMATCH", raw)
    valid = (
        document.get("assessmentRef") == assessment_ref
        and _is_int(document.get("profileRevision"))
        and isinstance(document.get("policyRef"), str)
        and bool(_REF.match(document["policyRef"]))
        and _is_int(document.get("policyGeneration"))
        and isinstance(constraints, dict)
    )
    if valid:
        practitioner = constraints.get("requiredPractitioner")
        treatments = constraints.get("allowedTreatments")
        minimum = constraints.get("minimumSlotMinutes")
        need = constraints.get("resourceNeed")
        valid = (
            (practitioner is None or (isinstance(practitioner, str) and bool(_REF.match(practitioner))))
            and (
                treatments is None
                or (
                    isinstance(treatments, list)
                    and all(isinstance(t, str) and _REF.match(t) for t in treatments)
                )
            )
            and (minimum is None or (_is_int(minimum) and 0 < minimum <= 24 * 60))
            and (need is None or (isinstance(need, str) and 0 < len(need) <= 40))
        )
    if not valid:
        raise AssessmentError("ASSESSMENT_CONTRACT_INVALID", raw)
    if document["profileRevision"] != expected_revision:
        raise AssessmentError("ASSESSMENT_REVISION_MISMATCH", raw)
    return Assessment(
        assessment_ref=assessment_ref,
        profile_revision=document["profileRevision"],
        policy_ref=document["policyRef"],
        policy_generation=document["policyGeneration"],
        constraints=Constraints(
            required_practitioner=practitioner,
            allowed_treatments=tuple(treatments) if treatments is not None else None,
            minimum_slot_minutes=minimum,
            resource_need=need,
        ),
    )


class AssessmentFetcher(Protocol):
    """What the worker needs from a CRM client: the HTTP one below, or the demo's in-process one."""

    def fetch(self, *, assessment_ref: str, revision: int, expected_hash: str) -> Assessment: ...


class AssessmentClient:
    """GET ``{CRM_BASE_URL}/assessments/{ref}?revision=N`` with connect and read timeouts."""

    def __init__(self, base_url: str | None = None, token: str | None = None, session=None):
        self.base_url = (base_url or settings.CRM_BASE_URL).rstrip("/")
        self.token = token if token is not None else settings.CRM_API_TOKEN
        self.session = session or requests.Session()
        self.timeout = (settings.CRM_CONNECT_TIMEOUT_SECONDS, settings.CRM_READ_TIMEOUT_SECONDS)

    def fetch(self, *, assessment_ref: str, revision: int, expected_hash: str) -> Assessment:
        url = f"{self.base_url}/assessments/{quote(assessment_ref, safe='')}"
        try:
            response = self.session.get(
                url,
                params={"revision": revision},
                headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"},
                timeout=self.timeout,
                stream=True,
            )
        except requests.Timeout:
            raise AssessmentTransient("ASSESSMENT_TIMEOUT") from None
        except requests.RequestException:
            raise AssessmentTransient("ASSESSMENT_UNAVAILABLE") from None
        try:
            raw = response.raw.read(settings.CRM_MAX_RESPONSE_BYTES + 1, decode_content=True)
        except requests.Timeout:
            raise AssessmentTransient("ASSESSMENT_TIMEOUT") from None
        except Exception:  # noqa: BLE001 - urllib3 read timeouts surface as several types
            raise AssessmentTransient("ASSESSMENT_TIMEOUT") from None
        finally:
            response.close()
        if response.status_code >= 500 or response.status_code == 429:
            raise AssessmentTransient("ASSESSMENT_UNAVAILABLE")
        if response.status_code != 200 or len(raw) > settings.CRM_MAX_RESPONSE_BYTES:
            raise AssessmentError("ASSESSMENT_CONTRACT_INVALID", raw)
        return parse_document(
            raw, expected_hash=expected_hash, expected_revision=revision, assessment_ref=assessment_ref
        )
