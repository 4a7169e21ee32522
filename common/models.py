"""Shared infrastructure rows: idempotency receipts and the transactional outbox."""

from django.db import models

from .refs import RefField


class AppendOnlyQuerySet(models.QuerySet):
    """For history tables (offer events, contact consent): rows are added, never updated or deleted."""

    def update(self, **kwargs):
        raise TypeError(f"{self.model.__name__} is append-only.")

    def delete(self):
        raise TypeError(f"{self.model.__name__} is append-only.")


class CommandReceipt(models.Model):
    """The stored answer of a command run with an Idempotency-Key, replayed byte for byte.

    The unique (scope, key) index is also the fence: a concurrent first caller holds the index
    entry until it commits, so a second caller with the same key waits and then replays.
    """

    ref = RefField(prefix="rcp")
    scope = models.CharField(max_length=200)
    key = models.CharField(max_length=200)
    command = models.CharField(max_length=100)
    request_digest = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField(default=0)
    response_body = models.TextField(default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "key"], name="receipt_unique_scope_key")]

    def __str__(self) -> str:
        return f"{self.command} {self.ref}"


class OutboxStatus(models.TextChoices):
    PENDING = "PENDING"
    LEASED = "LEASED"
    SENT = "SENT"
    DEAD = "DEAD"


OUTBOX_TRANSITIONS: dict[str, set[str]] = {
    OutboxStatus.PENDING: {OutboxStatus.LEASED},
    # A lease ends sent, dead, or back to PENDING (a failed attempt with retries left, a deferral, an expired
    # lease reclaimed); an expired lease may also be leased again directly (a stay: new owner, new attempt).
    OutboxStatus.LEASED: {OutboxStatus.SENT, OutboxStatus.DEAD, OutboxStatus.PENDING},
    OutboxStatus.SENT: set(),
    OutboxStatus.DEAD: set(),
}


class OutboxMessage(models.Model):
    """A side effect written in the same transaction as the state change that causes it.

    Payloads carry refs, states, reason codes and correlation ids only: never names or contacts
    (a delivery worker resolves contacts at send time). Delivery leases rows with SKIP LOCKED.
    """

    #: The moves ``common.outbox`` (the delivery loop, the one writer of a message's status) makes.
    STATE_MACHINE = ("status", OUTBOX_TRANSITIONS)

    ref = RefField(prefix="obx")
    topic = models.CharField(max_length=80)
    tenant_group_ref = models.CharField(max_length=40)
    clinic_ref = models.CharField(max_length=40)
    aggregate_ref = models.CharField(max_length=40, help_text="the ref of the row that caused the message")
    recipient_ref = models.CharField(max_length=40, blank=True, default="", help_text="a patient ref, if any")
    payload = models.JSONField(default=dict)
    channel = models.CharField(max_length=20, blank=True, default="")
    correlation_id = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=10, choices=OutboxStatus.choices, default=OutboxStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=80, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_error_code = models.CharField(max_length=60, blank=True, default="")
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="outbox_due"),
            models.Index(fields=["topic", "aggregate_ref"], name="outbox_topic_aggregate"),
            models.Index(fields=["clinic_ref", "status"], name="outbox_clinic_status"),
            models.Index(fields=["recipient_ref", "sent_at"], name="outbox_recipient_sent"),
        ]

    def __str__(self) -> str:
        return f"{self.topic} {self.ref}"


class AuditEntry(models.Model):
    """Who did what, where and why. The actor always comes from the authenticated user."""

    ref = RefField(prefix="aud")
    actor = models.ForeignKey("auth.User", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    actor_label = models.CharField(max_length=150, help_text="username or 'system:<job>'")
    action = models.CharField(max_length=80)
    tenant_group_ref = models.CharField(max_length=40, blank=True, default="")
    clinic_ref = models.CharField(max_length=40, blank=True, default="")
    target_ref = models.CharField(max_length=40, blank=True, default="")
    reason = models.CharField(max_length=500, blank=True, default="")
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    correlation_id = models.CharField(max_length=64, blank=True, default="")
    result = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["clinic_ref", "-created_at", "-id"], name="audit_clinic_recent")]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_label}"


class DeliveryOutcome(models.TextChoices):
    SENT = "SENT"
    FAILED = "FAILED"
    DEFERRED = "DEFERRED"
    FENCED = "FENCED"


class OutboxAttempt(models.Model):
    """One try at delivering one outbox message, by one worker under one lease."""

    message = models.ForeignKey(OutboxMessage, on_delete=models.CASCADE, related_name="attempt_rows")
    attempt = models.PositiveIntegerField()
    worker = models.CharField(max_length=80)
    outcome = models.CharField(max_length=10, choices=DeliveryOutcome.choices)
    error_code = models.CharField(max_length=60, blank=True, default="")
    provider = models.CharField(max_length=20, blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "attempt"], name="outbox_attempt_once"),
        ]

    def __str__(self) -> str:
        return f"{self.message_id}#{self.attempt} {self.outcome}"
