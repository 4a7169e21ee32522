"""``[base]/metadata``: the CapabilityStatement (R4, 4.0.1) built from the handlers the searches run, so
what it lists is what the server does."""

from __future__ import annotations

from django.utils import timezone
from fhir.resources.R4B.capabilitystatement import CapabilityStatement

from scheduling.models import Clinic

from . import fhir

FHIR_VERSION = "4.0.1"
#: The R4 type of each search parameter we take.
PARAMETER_TYPES = {
    "start": "date", "date": "date", "_lastUpdated": "date",
    "status": "token", "service-type": "token", "_id": "token", "identifier": "token", "active": "token",
    "schedule": "reference", "patient": "reference", "practitioner": "reference", "actor": "reference",
    "slot": "reference",
}
#: What the integration credential may write, per resource type.
WRITES: dict[str, dict] = {
    "Appointment": {"interaction": [{"code": "update"}], "conditionalUpdate": True, "updateCreate": False},
    "Subscription": {"resource": {
        "type": "Subscription",
        "interaction": [{"code": "create"}, {"code": "read"}, {"code": "delete"}, {"code": "search-type"}],
        "versioning": "versioned",
        "documentation": "rest-hook; criteria Appointment?… or Slot?… with this server's search parameters; "
                         "the integration credential only",
    }},
}


def _params(names) -> list[dict]:
    plain = sorted({name.partition(":")[0] for name in names})
    return [{"name": name, "type": PARAMETER_TYPES[name]} for name in plain] + [
        {"name": "_count", "type": "number",
         "documentation": "page size, 0–200 (default 50); 0: the total only (a Bundle with total and no entries)"}]


def _resource(kind: str, names, *, documentation: str) -> dict:
    resource = {
        "type": kind,
        "interaction": [{"code": "read"}, {"code": "search-type"}],
        "versioning": "versioned",
        "readHistory": False,
        "searchParam": _params(names),
        "documentation": documentation,
    }
    extra = WRITES.get(kind, {})
    resource["interaction"] += extra.get("interaction", [])
    resource.update({k: v for k, v in extra.items() if k != "interaction"})
    return resource


def statement(*, base_url: str, clinic: Clinic) -> CapabilityStatement:
    resources = [
        _resource("Slot", fhir.SLOT_PARAMETERS, documentation="free (a vacancy being refilled), "
                  "busy-tentative (an offer's hold), busy (a HELD or CONFIRMED appointment)"),
        _resource("Appointment", fhir.APPOINTMENT_PARAMETERS, documentation="the clinic's appointments; "
                  "patients are opaque references"),
        _resource("Schedule", fhir.SCHEDULE_PARAMETERS, documentation="one per practitioner"),
    ]
    resources += [extra["resource"] for kind, extra in WRITES.items() if "resource" in extra]
    return CapabilityStatement.model_validate({
        "status": "active",
        "date": timezone.now().date().isoformat(),
        "kind": "instance",
        "software": {"name": "clinic-waitlist"},
        "implementation": {"description": f"FHIR view of clinic {clinic.ref}", "url": base_url},
        "fhirVersion": FHIR_VERSION,
        "format": ["json", "application/fhir+json"],
        "rest": [{
            "mode": "server",
            "documentation": "Search: parameters AND, commas OR; date prefixes eq ne gt lt ge le sa eb; "
                             "unknown parameters are ignored unless Prefer: handling=strict. Paging follows "
                             "the Bundle's next link (keyset).",
            "security": {
                "cors": False,
                "description": "Authorization: Token <key> (a STAFF user reads; the clinic's integration "
                               "credential reads, writes appointments and manages subscriptions).",
            },
            "resource": resources,
        }],
    })
