"""Interop commands: the EHR's appointments (inbound) and FHIR subscriptions (outbound)."""

from .appointments import PreconditionFailed, clinic_grant_fhir_integration, ehr_appointment_put

__all__ = ["PreconditionFailed", "clinic_grant_fhir_integration", "ehr_appointment_put"]
