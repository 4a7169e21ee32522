"""Booking-reliability decisions: a read-only input behind a small provider interface.

The matcher asks for one page of candidates' decisions in one call (``decisions_for``); the
FRESH_READ policy asks for one patient's decision again (``fresh_read``) outside any transaction.
The default provider reads the rows fed through ``services.decisions.decision_record`` (or the
``booking-decisions`` endpoint); another provider (e.g. a CRM client) can be installed with
``set_decision_provider``.

Every read of "the patient's latest decision" goes through the installed provider: the matcher's page
batch, dispatch's FRESH_READ, staff review, the console's evidence and freshness counts, reconcile's
review backstop; the claim, which must stay one lock statement (issue 15), reads it as the provider's
SQL expression (``newest_expression``) inside that statement.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.db.models import JSONField, Subquery
from django.db.models.functions import JSONObject

from waitlist import queries
from waitlist.models import BookingReliabilityDecision, DecisionStatus


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

    def newest_expression(self, *, clinic, patient):
        """The newest decision as a SQL expression for one query (``clinic``/``patient`` are values or
        ``OuterRef``s): a JSON object ``{ref, status, rank, expires_at}`` or NULL. See ``decision_from_json``."""
        ...

    def newest_per_patient_sql(self, pairs: str) -> str:
        """SQL for the newest decision of each (clinic_id, patient_id) row of the relation ``pairs`` (a CTE's
        name): rows ``clinic_id, patient_id, status, expires_at``; a patient without one has no row."""
        ...


class StoredDecisionProvider:
    """The newest recorded decision per patient; a patient without one is UNAVAILABLE."""

    #: "Newest" is the last received (ties: the last inserted), here and in ``newest_expression``.
    NEWEST = ("-received_at", "-id")  # (and ``queries.decisions_newest``'s order)

    def decisions_for(self, *, clinic, patient_ids: Iterable[int]) -> dict[int, Decision]:
        ids = list(patient_ids)
        if not ids:
            return {}
        rows = queries.decisions_newest(getattr(clinic, "pk", clinic), ids)
        return {row[0]: Decision(*row[1:]) for row in rows}

    def fresh_read(self, *, clinic, patient_id: int) -> Decision | None:
        return self.decisions_for(clinic=clinic, patient_ids=[patient_id]).get(patient_id)

    def newest_per_patient_sql(self, pairs: str) -> str:
        return queries.decisions_newest_per_pair_sql(pairs)

    def newest_expression(self, *, clinic, patient) -> Subquery:
        newest = BookingReliabilityDecision.objects.filter(clinic=clinic, patient=patient).order_by(*self.NEWEST)
        return Subquery(
            newest.values(
                latest=JSONObject(ref="decision_ref", status="status", rank="priority_rank", expires_at="expires_at")
            )[:1],
            output_field=JSONField(),
        )


def decision_from_json(value: dict | None) -> Decision | None:
    """The ``Decision`` a ``newest_expression`` read returned (None for NULL)."""
    if value is None:
        return None
    expires_at = datetime.fromisoformat(value["expires_at"]) if value["expires_at"] else None
    return Decision(value["ref"], value["status"], value["rank"], expires_at)


_provider: DecisionProvider = StoredDecisionProvider()


def get_decision_provider() -> DecisionProvider:
    return _provider


def decisions_now(provider: DecisionProvider | None, *, clinic, patient_ids: Iterable[int], now: datetime,
                  read_with_page: Iterable[tuple] | None = None) -> dict[int, tuple[Decision, str]]:
    """What a matcher page needs of the decisions, in one call: each patient's decision from ``provider`` (None: the
    installed one) in one batch (``decisions_for``), with its status now (``Decision.effective_status``).

    ``read_with_page``: the stored decisions the page statement read with its rows (``queries.matcher_page``,
    ``decisions=True``), as (patient id, ref, status, rank, expires_at), ref NULL for none. They are the installed
    provider's answer when it is the stored one, so no statement is run for them; another provider is asked."""
    if provider is None and read_with_page is not None and type(_provider) is StoredDecisionProvider:
        decisions = {row[0]: Decision(*row[1:]) for row in read_with_page if row[1] is not None}
    else:
        decisions = (provider or _provider).decisions_for(clinic=clinic, patient_ids=patient_ids)
    return {patient_id: (decision, decision.effective_status(now)) for patient_id, decision in decisions.items()}


def set_decision_provider(provider: DecisionProvider) -> DecisionProvider:
    """Install another provider; returns the previous one (tests restore it)."""
    global _provider
    previous, _provider = _provider, provider
    return previous
