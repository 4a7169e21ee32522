"""The EHR side of the inbound tests: its credential, and the Appointment it PUTs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from interop.fhir import TREATMENT_SYSTEM, fhir_id
from interop.services import clinic_grant_fhir_integration
from tests import factories as f
from tests.conftest import token_client

EHR_SYSTEM = "urn:oid:1.2.410.100.1"


def ehr_user(clinic):
    """A user holding only the clinic's FHIR integration grant (no STAFF role)."""
    user = f.UserFactory()
    clinic_grant_fhir_integration(clinic=clinic, user=user)
    return user


def ehr_client(clinic):
    return token_client(ehr_user(clinic))


def appointment(world, patient, starts_at: datetime, status: str = "booked", practitioner=None) -> dict:
    practitioner = practitioner or world.doctor
    return {
        "resourceType": "Appointment",
        "status": status,
        "start": starts_at.isoformat(),
        "end": (starts_at + timedelta(minutes=world.treatment.duration_minutes)).isoformat(),
        "serviceType": [{"coding": [{"system": TREATMENT_SYSTEM, "code": world.treatment.ref}]}],
        "participant": [
            {"actor": {"reference": f"Patient/{fhir_id(patient.ref)}"}, "status": "accepted"},
            {"actor": {"reference": f"Practitioner/{fhir_id(practitioner.ref)}"}, "status": "accepted"},
        ],
    }


def put(client, clinic, identifier: str, body: dict, **headers):
    return client.put(f"/api/v1/clinics/{clinic.ref}/fhir/Appointment?identifier={identifier}",
                      data=json.dumps(body), content_type="application/fhir+json",
                      HTTP_ACCEPT="application/fhir+json", **headers)
