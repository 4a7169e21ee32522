"""Feeding booking-reliability decisions (read-only input: recorded, never recomputed)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from common.cas import cas_update
from common.errors import ValidationFailed
from common.services import audit_record, new_correlation_id
from scheduling.models import Clinic, Patient
from waitlist.effects import queue_dispatch
from waitlist.models import (
    FEED_DECISION_STATUSES,
    OPEN_ENTRY_STATUSES,
    BookingReliabilityDecision,
    DecisionStatus,
    VacancyStatus,
    WaitlistEntry,
)


def decision_record(
    *,
    clinic: Clinic,
    patient: Patient,
    decision_ref: str,
    status: str,
    expires_at: datetime,
    priority_rank: int = 0,
    actor=None,
    now: datetime | None = None,
    correlation_id: str = "",
    idempotency_key: str = "",
) -> BookingReliabilityDecision:
    """Store a decision from the reliability feed (an integration credential, ``actor``); audited.

    The same ``decision_ref`` again returns the stored row unchanged (no second audit row). A new
    decision's ``priority_rank`` becomes the rank of the patient's open entries (the matcher's order;
    entry version + 1), and a FRESH one queues dispatch for every vacancy in staff review over this
    patient, so the review resolves itself.
    """
    if patient.clinic_id != clinic.pk:
        raise ValidationFailed(fields={"patient": ["Not found in this clinic."]})
    if status not in FEED_DECISION_STATUSES:
        raise ValidationFailed(fields={"status": ["Must be FRESH, STALE or UNAVAILABLE."]})
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    with transaction.atomic():
        decision, created = BookingReliabilityDecision.objects.get_or_create(
            clinic=clinic,
            decision_ref=decision_ref,
            defaults={
                "tenant_group_id": clinic.tenant_group_id,
                "patient": patient,
                "status": status,
                "priority_rank": priority_rank,
                "expires_at": expires_at,
                "received_at": now,
            },
        )
        if not created:
            return decision
        reranked = entries_rerank(clinic=clinic, patient_id=patient.pk, priority_rank=priority_rank)
        if status == DecisionStatus.FRESH:
            _redispatch_reviews(clinic, patient)
        audit_record(
            actor=actor,
            action="waitlist.decision_record",
            clinic=clinic,
            target_ref=decision.ref,
            correlation_id=correlation_id,
            idempotency_key=idempotency_key,
            result={
                "decision_ref": decision.decision_ref,
                "patient": patient.ref,
                "status": status,
                "priority_rank": priority_rank,
                "expires_at": expires_at.isoformat(),
                "entries_reranked": reranked,
            },
            system_label="decision-feed",
        )
        return decision


def _redispatch_reviews(clinic: Clinic, patient: Patient) -> None:
    """A FRESH decision resolves every staff review over this patient: their vacancies are dispatched again."""
    reviews = clinic.vacancies.filter(status=VacancyStatus.REVIEW, review_entry__patient=patient)
    for vacancy_id in reviews.values_list("pk", flat=True):
        queue_dispatch(vacancy_id)


def entries_rerank(*, clinic: Clinic, patient_id: int, priority_rank: int) -> list[str]:
    """Set the rank of the patient's open entries (locked by id; CAS version + 1). Returns their refs."""
    changed = []
    entries = (
        WaitlistEntry.objects.select_for_update(no_key=True)
        .filter(clinic=clinic, patient_id=patient_id, status__in=OPEN_ENTRY_STATUSES)
        .exclude(priority_rank=priority_rank)
        .order_by("pk")
    )
    for entry in entries:
        cas_update(entry, priority_rank=priority_rank)
        changed.append(entry.ref)
    return changed
