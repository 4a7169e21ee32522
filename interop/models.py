"""Interop rows: the EHR's identifiers of our appointments and FHIR subscriptions (docs/fhir.md)."""

from django.conf import settings
from django.db import models
from django.db.models.functions import Now

from common.refs import RefField
from scheduling.models import Appointment, Clinic

#: The outbox topic of a subscription's notifications (one message per subscriber and change).
NOTIFICATION_TOPIC = "fhir.subscription"

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


class SubscriptionStatus(models.TextChoices):
    REQUESTED = "requested"
    ACTIVE = "active"
    ERROR = "error"
    OFF = "off"


class Subscription(models.Model):
    """An R4 rest-hook Subscription of the clinic's integration credential: ``criteria`` is a search
    (``Appointment?status=booked``) whose matching changes are POSTed to ``endpoint`` via the outbox."""

    ref = RefField(prefix="sub")
    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="+")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    resource_type = models.CharField(max_length=20)
    criteria = models.CharField(max_length=500)
    reason = models.CharField(max_length=200, blank=True, default="")
    endpoint = models.URLField(max_length=500)
    headers = models.JSONField(default=list, blank=True, help_text="'Name: value' lines sent with each POST")
    payload = models.CharField(max_length=40, blank=True, default="application/fhir+json")
    secret = models.CharField(max_length=64, help_text="HMAC-SHA256 key of the X-Signature header")
    status = models.CharField(max_length=10, choices=SubscriptionStatus.choices, default=SubscriptionStatus.ACTIVE)
    error = models.CharField(max_length=200, blank=True, default="")
    consecutive_failures = models.PositiveIntegerField(default=0)
    #: The first of the failed POSTs in a row (None after a delivered one): what ``error`` tells, with a class.
    failing_since = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["clinic", "status"], name="subscription_clinic_status")]

    def __str__(self) -> str:
        return f"{self.ref} {self.criteria}"


class ResourceChange(models.Model):
    """A change to an Appointment or a vacancy's Slot, written by PostgreSQL triggers (migration 0004) in
    the changing transaction, whatever service made it; the fan-out turns it into notifications."""

    clinic_id = models.BigIntegerField()
    kind = models.CharField(max_length=12)  # "appointment" | "vacancy"
    row_id = models.BigIntegerField()
    at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"{self.kind}:{self.row_id}"


class SentState(models.Model):
    """What a subscription was last told about one resource, so each change is sent once."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="+")
    resource_id = models.CharField(max_length=64)
    signature = models.CharField(max_length=200)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["subscription", "resource_id"], name="sent_state_unique")]

    def __str__(self) -> str:
        return f"{self.subscription_id}:{self.resource_id}"
