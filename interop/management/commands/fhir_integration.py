"""Create (or reuse) the clinic's EHR integration credential and print its API token.

    manage.py fhir_integration --clinic CL --username NAME

The user gets only the object permission ``scheduling.fhir_integration`` on the clinic (no STAFF role): it
reads the FHIR view, conditionally updates Appointments and manages Subscriptions (docs/fhir.md). The
grant is audited.
"""

from __future__ import annotations

from interop.services import clinic_grant_fhir_integration
from scheduling.management.integration import IntegrationCredentialCommand


class Command(IntegrationCredentialCommand):
    help = "Create the clinic's FHIR (EHR) integration user and print its token."
    grant = staticmethod(clinic_grant_fhir_integration)
