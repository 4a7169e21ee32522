"""Shadow policies: a candidate clinic policy observed beside the enforced one before it is enforced.

Imported by ``waitlist.models`` (Django finds the models there). A SHADOW policy never offers, holds or
notifies: each automatic promotion records one ``ShadowObservation`` of whom it would have offered.
"""

from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q

from common.refs import RefField


class ShadowStatus(models.TextChoices):
    SHADOW = "SHADOW"
    PROMOTED = "PROMOTED"
    DISCARDED = "DISCARDED"


SHADOW_TRANSITIONS: dict[str, set[str]] = {
    ShadowStatus.SHADOW: {ShadowStatus.PROMOTED, ShadowStatus.DISCARDED},
    ShadowStatus.PROMOTED: set(),
    ShadowStatus.DISCARDED: set(),
}


class ShadowPolicy(models.Model):
    """The candidate's full policy fields (the enforced version's values with the published changes)."""

    #: The moves ``waitlist.shadow.services`` makes, under the row's lock (no ``version``: decided once).
    STATE_MACHINE = ("status", SHADOW_TRANSITIONS)

    ref = RefField(prefix="wls")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=10, choices=ShadowStatus.choices, default=ShadowStatus.SHADOW)
    fields = models.JSONField(encoder=DjangoJSONEncoder, help_text="WaitlistPolicy field values (no version)")
    changes = models.JSONField(
        encoder=DjangoJSONEncoder, default=dict, help_text="the fields that differ from the enforced version"
    )
    base_version = models.PositiveIntegerField(help_text="the enforced version when published")
    promoted_version = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["clinic"], condition=Q(status="SHADOW"), name="wl_shadow_one_per_clinic"),
        ]

    def __str__(self) -> str:
        return self.ref


class ShadowObservation(models.Model):
    """One dispatch seen by the shadow: the entry enforced, the entry the shadow would have offered."""

    shadow = models.ForeignKey(ShadowPolicy, on_delete=models.PROTECT, related_name="observations")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    vacancy = models.ForeignKey("waitlist.Vacancy", on_delete=models.PROTECT, related_name="+")
    enforced_entry = models.ForeignKey("waitlist.WaitlistEntry", on_delete=models.PROTECT, related_name="+")
    shadow_entry = models.ForeignKey(
        "waitlist.WaitlistEntry", null=True, on_delete=models.PROTECT, related_name="+"
    )
    shadow_outcome = models.CharField(max_length=16, help_text="OFFERED, STAFF_REVIEW or NO_CANDIDATE")
    agreed = models.BooleanField()
    reason_code = models.CharField(max_length=60, blank=True, default="")
    correlation_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["shadow", "created_at"], name="wl_shadow_obs_by_time")]

    def __str__(self) -> str:
        return f"{self.shadow_id}:{self.vacancy_id}"
