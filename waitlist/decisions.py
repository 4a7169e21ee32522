"""Booking-reliability decisions: a read-only input behind a small provider interface.

The matcher asks for one page of candidates' decisions in one call (``decisions_for``); the
FRESH_READ policy asks for one patient's decision again (``fresh_read``) outside any transaction.
The default provider reads the rows fed through ``services.decisions.decision_record`` (or the
``booking-decisions`` endpoint); another provider (e.g. a CRM client) can be installed with
``set_decision_provider``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from .models import BookingReliabilityDecision, DecisionStatus


@dataclass(frozen=True)
class Decision:
    decision_ref: str
    status: str
    priority_rank: int
    expires_at: datetime | None  # None: no decision applies (NOT_USED) or none has an expiry

    def effective_status(self, now: datetime) -> str:
        """A FRESH decision past its expiry is STALE (expiry is inclusive: at ``expires_at`` it is stale)."""
        if self.status == DecisionStatus.FRESH and self.expires_at is not None and now >= self.expires_at:
            return DecisionStatus.STALE
        return self.status


class DecisionProvider(Protocol):
    def decisions_for(self, *, clinic, patient_ids: Iterable[int]) -> dict[int, Decision]: ...

    def fresh_read(self, *, clinic, patient_id: int) -> Decision | None: ...


class StoredDecisionProvider:
    """The newest recorded decision per patient; a patient without one is UNAVAILABLE."""

    def decisions_for(self, *, clinic, patient_ids: Iterable[int]) -> dict[int, Decision]:
        ids = list(patient_ids)
        if not ids:
            return {}
        rows = (
            BookingReliabilityDecision.objects.filter(clinic=clinic, patient_id__in=ids)
            .order_by("patient_id", "-received_at", "-id")
            .distinct("patient_id")
            .values_list("patient_id", "decision_ref", "status", "priority_rank", "expires_at")
        )
        return {row[0]: Decision(*row[1:]) for row in rows}

    def fresh_read(self, *, clinic, patient_id: int) -> Decision | None:
        return self.decisions_for(clinic=clinic, patient_ids=[patient_id]).get(patient_id)


_provider: DecisionProvider = StoredDecisionProvider()


def get_decision_provider() -> DecisionProvider:
    return _provider


def set_decision_provider(provider: DecisionProvider) -> DecisionProvider:
    """Install another provider; returns the previous one (tests restore it)."""
    global _provider
    previous, _provider = _provider, provider
    return previous
