"""Shared infrastructure rows: idempotency receipts and the transactional outbox."""

from django.db import models

from .refs import RefField


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
