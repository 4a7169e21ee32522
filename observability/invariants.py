"""Cross-app invariants checked in the database: nothing lost, nothing duplicated, every row in a legal state.

Used after fault injection (tests/faults), every minute by the soak run, and by the benchmarks. Each
check is one aggregate query that counts violating rows (no table is loaded into Python), optionally
limited to some clinics. ``check()`` returns the counts; ``report.ok`` is True when all are zero. The
checks are querysets (states from the apps' enums), each the statement the SQL checks before issue 42 ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from common.models import AuditEntry, DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from reevaluation.models import JobState, ReevaluationJob
from scheduling.models import (
    LIVE_HOLD_STATUSES,
    Appointment,
    AppointmentStatus,
    CapacityAllocation,
    CapacityHold,
    HoldStatus,
)
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    EntryStatus,
    Offer,
    OfferEvent,
    OfferStatus,
    VacancyStatus,
    WaitlistEntry,
)


@dataclass(frozen=True)
class _Scope:
    """The checked clinics (``None``: all) by id and by ref, and the database."""

    ids: list[int] | None
    refs: list[str] | None
    db: str | None

    def of(self, model, path: str = "clinic_id") -> QuerySet:
        """``model``'s rows, limited to the clinics by ``path`` (``…clinic_id`` or ``…clinic_ref``)."""
        rows = model.objects.using(self.db).all()
        if self.ids is None:
            return rows
        return rows.filter(**{f"{path}__in": self.refs if path.endswith("clinic_ref") else self.ids})


def _repeated(rows: QuerySet, *group: str) -> int:
    """How many groups of ``rows`` by ``group`` hold more than one row."""
    return rows.order_by().values(*group).annotate(rows=Count("*")).filter(rows__gt=1).count()


def _offer_creations():
    """Per offer, its events from no state into OFFERED (OFFERED → OFFERED events such as NOTICE_DELIVERED are
    not creations)."""
    creations = (OfferEvent.objects.filter(offer=OuterRef("pk"), to_status=OfferStatus.OFFERED, from_status="")
                 .order_by().values("offer").annotate(n=Count("*")).values("n"))
    return Coalesce(Subquery(creations), 0)


#: name → the count of violating rows in the scope.
CHECKS: dict[str, Callable[[_Scope], int]] = {
    # Offers and vacancies: one active offer per vacancy and per entry, states agree.
    "vacancies_with_more_than_one_active_offer": lambda s: _repeated(
        s.of(Offer).filter(status__in=ACTIVE_OFFER_STATUSES), "vacancy_id"),
    "entries_with_more_than_one_active_offer": lambda s: _repeated(
        s.of(Offer).filter(status__in=ACTIVE_OFFER_STATUSES), "entry_id"),
    "offered_offers_whose_entry_is_not_offered": lambda s: s.of(Offer).filter(
        status=OfferStatus.OFFERED).exclude(entry__status=EntryStatus.OFFERED).count(),
    "offered_entries_without_an_offered_offer": lambda s: s.of(WaitlistEntry).filter(
        ~Exists(Offer.objects.filter(entry=OuterRef("pk"), status=OfferStatus.OFFERED)),
        status=EntryStatus.OFFERED).count(),
    "open_vacancies_with_an_accepted_offer_and_booking": lambda s: s.of(Offer, "vacancy__clinic_id").filter(
        status=OfferStatus.ACCEPTED, hold__status=HoldStatus.CONSUMED, vacancy__status=VacancyStatus.OPEN).count(),
    # Holds and allocations: every live offer has a live hold, one active allocation per hold.
    "offered_offers_without_an_active_hold": lambda s: s.of(Offer).filter(
        status=OfferStatus.OFFERED).exclude(hold__status=HoldStatus.ACTIVE).count(),
    "accepted_offers_without_an_accepted_or_consumed_hold": lambda s: s.of(Offer).filter(
        status=OfferStatus.ACCEPTED).exclude(hold__status__in=(HoldStatus.ACCEPTED, HoldStatus.CONSUMED)).count(),
    "holds_with_more_than_one_active_allocation": lambda s: _repeated(
        s.of(CapacityAllocation).filter(active=True, hold__isnull=False), "hold_id"),
    "live_holds_without_an_active_allocation": lambda s: s.of(CapacityHold).filter(
        ~Exists(CapacityAllocation.objects.filter(hold=OuterRef("pk"), active=True)),
        status__in=LIVE_HOLD_STATUSES).count(),
    "released_holds_with_an_active_allocation": lambda s: s.of(CapacityHold).filter(
        Exists(CapacityAllocation.objects.filter(hold=OuterRef("pk"), active=True)),
        status=HoldStatus.RELEASED).count(),
    # Bookings: no CONFIRMED double booking of a practitioner (pairs, joined through their practitioner).
    "confirmed_double_bookings": lambda s: s.of(Appointment).filter(
        status=AppointmentStatus.CONFIRMED, practitioner__appointments__status=AppointmentStatus.CONFIRMED,
        practitioner__appointments__id__gt=F("id"), practitioner__appointments__starts_at__lt=F("ends_at"),
        practitioner__appointments__ends_at__gt=F("starts_at")).count(),
    # Offer history: exactly one creation event per offer, no transition recorded twice.
    "offers_without_exactly_one_creation_event": lambda s: s.of(Offer).annotate(
        creations=_offer_creations()).exclude(creations=1).count(),
    "offers_with_a_duplicated_transition_event": lambda s: _repeated(
        s.of(OfferEvent, "offer__clinic_id"), "offer_id", "from_status", "to_status", "reason_code"),
    "offers_whose_state_has_no_event": lambda s: s.of(Offer).filter(
        ~Exists(OfferEvent.objects.filter(offer=OuterRef("pk"), to_status=OuterRef("status")))).count(),
    # Reevaluation jobs: legal states, RUNNING always under a (live or expired) lease, bounded attempts.
    "jobs_in_an_unknown_state": lambda s: s.of(ReevaluationJob).exclude(state__in=JobState.values).count(),
    "running_jobs_without_a_lease": lambda s: s.of(ReevaluationJob).filter(
        Q(lease_owner="") | Q(lease_expires_at__isnull=True), state=JobState.RUNNING).count(),
    "jobs_over_their_attempt_budget": lambda s: s.of(ReevaluationJob).filter(
        attempts__gt=F("max_attempts")).count(),
    # Outbox: each message delivered at most once, and a delivered message is marked SENT (a skipped one,
    # e.g. for an offer closed before its notice went out, is SENT with no send time: not checked).
    "outbox_messages_delivered_more_than_once": lambda s: _repeated(
        s.of(OutboxAttempt, "message__clinic_ref").filter(outcome=DeliveryOutcome.SENT), "message_id"),
    "outbox_messages_delivered_but_not_marked_sent": lambda s: s.of(OutboxMessage, "clinic_ref").filter(
        Exists(OutboxAttempt.objects.filter(message=OuterRef("pk"), outcome=DeliveryOutcome.SENT))).exclude(
        status=OutboxStatus.SENT).count(),
    "leased_outbox_messages_without_a_lease": lambda s: s.of(OutboxMessage, "clinic_ref").filter(
        status=OutboxStatus.LEASED, lease_expires_at__isnull=True).count(),
    # Audit: one row per idempotent command, never two.
    "duplicated_audit_rows": lambda s: _repeated(
        s.of(AuditEntry, "clinic_ref").exclude(idempotency_key=""),
        "action", "clinic_ref", "target_ref", "idempotency_key"),
}

#: Counts reported next to the checks (rows seen), so a run can say what it covered.
TOTALS: dict[str, Callable[[_Scope], int]] = {
    "offers": lambda s: s.of(Offer).count(),
    "holds": lambda s: s.of(CapacityHold).count(),
    "confirmed_appointments": lambda s: s.of(Appointment).filter(status=AppointmentStatus.CONFIRMED).count(),
    "jobs": lambda s: s.of(ReevaluationJob).count(),
    "outbox_messages": lambda s: s.of(OutboxMessage, "clinic_ref").count(),
    "audit_rows": lambda s: s.of(AuditEntry, "clinic_ref").count(),
}


@dataclass
class InvariantReport:
    violations: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def failed(self) -> dict[str, int]:
        return {name: count for name, count in self.violations.items() if count}

    def summary(self) -> str:
        totals = ", ".join(f"{k}={v}" for k, v in self.totals.items())
        return f"invariants {'OK' if self.ok else 'VIOLATED ' + str(self.failed())} ({totals})"


def check(clinic_ids: list[int] | None = None, *, using=None) -> InvariantReport:
    """Count violations (and rows) across all clinics, or only ``clinic_ids``; ``using``: a database alias
    or connection (default: the default database)."""
    from scheduling.models import Clinic

    db = getattr(using, "alias", using)
    refs = None
    if clinic_ids is not None:
        refs = list(Clinic.objects.using(db).filter(pk__in=clinic_ids).values_list("ref", flat=True))
    scope = _Scope(None if clinic_ids is None else list(clinic_ids), refs, db)
    return InvariantReport(violations={name: count(scope) for name, count in CHECKS.items()},
                           totals={name: count(scope) for name, count in TOTALS.items()})
