"""Liveness evidence of the background processes, kept in PostgreSQL so it survives a Redis outage."""

from __future__ import annotations

from django.db import models


class ProcessRole(models.TextChoices):
    BEAT = "beat", "beat"
    WORKER = "worker", "worker"
    # Not a process: one row whose ``send_failed_at`` is the last time any web or worker process could not send
    # an after-commit follow-up (a vacancy's dispatch) to the broker (observability.components.effect_send_failed).
    SENDER = "sender", "after-commit sender"


class Heartbeat(models.Model):
    """One row per beat or worker process name: when it last showed life, and (beat) when it last
    managed, or failed, to hand a task to the broker. Written by the process itself, read by
    /readyz and /metrics; a name is the Celery node name (never shown unauthenticated)."""

    role = models.CharField(max_length=10, choices=ProcessRole.choices)
    name = models.CharField(max_length=200)
    seen_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    send_failed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["role", "name"], name="heartbeat_one_per_process")]

    def __str__(self) -> str:
        return f"{self.role}:{self.name}"
