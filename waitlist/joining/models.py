"""A clinic's self-service settings (ADMIN-only, audited: ``services.join_settings_set``)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class JoinSettings(models.Model):
    """Whether patients may join the clinic's list themselves, for which treatments, from which web origins, and
    what the clinic asks of a verified request and of a long wait. No row: self-service is off."""

    clinic = models.OneToOneField("scheduling.Clinic", on_delete=models.CASCADE, related_name="join_settings")
    enabled = models.BooleanField(default=False)
    treatments = models.ManyToManyField("scheduling.Treatment", blank=True, related_name="+")
    #: Web origins (``https://clinic.example``) whose pages may call the public API from a browser (CORS).
    allowed_origins = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    #: A verified request waits for staff (``join_request_approve``) instead of becoming an entry at once.
    approval_required = models.BooleanField(default=False)
    #: Upkeep: ask "do you still need an earlier time?" every this many weeks of waiting (0: never).
    upkeep_weeks = models.PositiveSmallIntegerField(default=8, validators=[MaxValueValidator(104)])
    #: Upkeep: a "yes" starts the wait again (``waiting_since`` = the answer); by default the place is kept.
    upkeep_refreshes_wait = models.BooleanField(default=False)
    #: Upkeep: days without an answer before the entry is paused.
    upkeep_answer_days = models.PositiveSmallIntegerField(default=7, validators=[MinValueValidator(1)])
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "waitlist"
        verbose_name_plural = "join settings"

    def __str__(self) -> str:
        return f"join settings of clinic {self.clinic_id}"


class UpkeepOutcome(models.TextChoices):
    ASKED = "ASKED"  # sent (or on its way), no answer yet
    STILL_NEEDED = "STILL_NEEDED"  # "yes": the entry keeps its place
    NOT_NEEDED = "NOT_NEEDED"  # "no": the entry was withdrawn
    PAUSED = "PAUSED"  # no answer in time: the entry was paused until the patient or staff resume it


class UpkeepAsk(models.Model):
    """One "do you still need an earlier time?" question about one entry (issue 40), refs only."""

    entry = models.ForeignKey("waitlist.WaitlistEntry", on_delete=models.CASCADE, related_name="+")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.CASCADE, related_name="+")
    asked_at = models.DateTimeField()
    answer_by = models.DateTimeField()
    outcome = models.CharField(max_length=12, choices=UpkeepOutcome.choices, default=UpkeepOutcome.ASKED)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "waitlist"
        indexes = [models.Index(fields=["outcome", "answer_by"], name="upkeep_due"),
                   models.Index(fields=["entry", "-asked_at"], name="upkeep_latest")]
        constraints = [models.UniqueConstraint(fields=["entry"], condition=models.Q(outcome="ASKED"),
                                               name="upkeep_one_open_question")]

    def __str__(self) -> str:
        return f"upkeep {self.entry_id} {self.outcome}"
