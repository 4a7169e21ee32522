"""Every FHIR body the tests receive is validated with ``fhir.resources`` (R4B: the R4 shapes we use)."""

from __future__ import annotations

import json

from fhir.resources.R4B import get_fhir_model_class
from fhir.resources.R4B.bundle import Bundle

FHIR_JSON = "application/fhir+json"


def validated(response, status: int = 200):
    """The response's body as a validated FHIR resource (errors included), after checking its status."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == FHIR_JSON
    body = json.loads(response.content)
    return get_fhir_model_class(body["resourceType"]).model_validate(body)


def entries(response, model) -> list:
    bundle = validated(response)
    assert isinstance(bundle, Bundle) and bundle.type == "searchset"
    return [model.model_validate(entry.resource.model_dump()) for entry in bundle.entry or []]


def outcome(response, status: int, code: str):
    """An OperationOutcome with one error issue of type ``code`` and a diagnostics string."""
    result = validated(response, status)
    assert result.get_resource_type() == "OperationOutcome"
    issue = result.issue[0]
    assert (issue.severity, issue.code) == ("error", code)
    assert issue.diagnostics
    return result


def links(response) -> dict[str, str]:
    return {link["relation"]: link["url"] for link in json.loads(response.content).get("link", [])}
