"""Standard-format read views for other systems: FHIR R4 Slot and Appointment (docs/fhir.md)."""
