"""Interop rows: the EHR's identifiers of our appointments and FHIR subscriptions (docs/fhir.md)."""

from django.db import models

from scheduling.models import Appointment, Clinic

#: The object permission (on a clinic) of the EHR integration credential: FHIR writes and subscriptions.
FHIR_INTEGRATION_PERMISSION = "fhir_integration"


class AppointmentIdentifier(models.Model):
    """The EHR's ``system|value`` for one of our appointments: the key of a conditional update
    (``PUT Appointment?identifier=…``). Unique per clinic, so two EHR requests for the same identifier
    serialize on the index and the second one updates what the first created."""

    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="+")
    appointment = models.ForeignKey(Appointment, on_delete=models.PROTECT, related_name="ehr_identifiers")
    system = models.CharField(max_length=200)
    value = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["clinic", "system", "value"], name="ehr_identifier_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.system}|{self.value}"
