"""Standing acceptance: a patient's advance yes to any slot that fits their entry ("book me automatically").

Imported by ``waitlist.models`` (Django finds the model there). Recorded like contact consent: append-only
per entry, the newest row is current; a revoke is a new row. Holds no contact data.
"""

from __future__ import annotations

from django.db import models

from common.models import AppendOnlyQuerySet
from common.refs import RefField


class StandingAcceptanceState(models.TextChoices):
    GRANTED = "GRANTED"
    REVOKED = "REVOKED"


class StandingAcceptanceSource(models.TextChoices):
    CLAIM_PAGE = "CLAIM_PAGE"  # the patient ticked "book me automatically next time"
    API = "API"  # an API client (the clinic's app) on the patient's word
    STAFF = "STAFF"  # staff, with the patient's consent (the reason says how it was given)
    NOTICE_LINK = "NOTICE_LINK"  # the revoke link of a notice


class StandingAcceptance(models.Model):
    """One grant or revoke of an entry's standing acceptance."""

    ref = RefField(prefix="sta")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    entry = models.ForeignKey("waitlist.WaitlistEntry", on_delete=models.PROTECT, related_name="standing")
    patient = models.ForeignKey("scheduling.Patient", on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=8, choices=StandingAcceptanceState.choices)
    min_notice_minutes = models.PositiveIntegerField(
        default=0, help_text="book only slots that start at least this long after the booking"
    )
    source = models.CharField(max_length=12, choices=StandingAcceptanceSource.choices)
    actor = models.CharField(max_length=150, help_text="username, or 'patient' / 'system:<job>'")
    reason = models.CharField(max_length=200, blank=True, default="", help_text="staff: how the patient agreed")
    correlation_id = models.CharField(max_length=64, blank=True, default="")
    recorded_at = models.DateTimeField()

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        indexes = [
            # The newest row per entry: the matcher's current-state lookup.
            models.Index(fields=["entry", "-id"], name="wl_standing_latest"),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} {self.state}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("StandingAcceptance is append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("StandingAcceptance is append-only.")
