"""Feeding booking-reliability decisions (read-only input: recorded, never recomputed)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from common.errors import ValidationFailed
from scheduling.models import Clinic, Patient

from ..models import BookingReliabilityDecision, DecisionStatus


def decision_record(
    *,
    clinic: Clinic,
    patient: Patient,
    decision_ref: str,
    status: str,
    expires_at: datetime,
    priority_rank: int = 0,
    now: datetime | None = None,
) -> BookingReliabilityDecision:
    """Store a decision; the same ``decision_ref`` again returns the stored row unchanged."""
    if patient.clinic_id != clinic.pk:
        raise ValidationFailed(fields={"patient": ["Not found in this clinic."]})
    if status not in DecisionStatus.values:
        raise ValidationFailed(fields={"status": ["Must be FRESH, STALE or UNAVAILABLE."]})
    with transaction.atomic():
        decision, _ = BookingReliabilityDecision.objects.get_or_create(
            clinic=clinic,
            decision_ref=decision_ref,
            defaults={
                "tenant_group_id": clinic.tenant_group_id,
                "patient": patient,
                "status": status,
                "priority_rank": priority_rank,
                "expires_at": expires_at,
                "received_at": now or timezone.now(),
            },
        )
        return decision
