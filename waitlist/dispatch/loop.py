"""The operating loop's jobs: bounded, idempotent runs that beat, Celery and management commands call.

Neither job checks the waitlist flag for housekeeping (expiry, stale offers, stuck bookings, holds
that lost their slot): ARCHITECTURE.md flow 8. New offers only come from ``vacancy_dispatch``,
which answers DISABLED while the flag is off.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.utils import timezone

from common.errors import DomainError
from common.services import new_correlation_id
from waitlist.dispatch.reconcile_reads import offers_without_active_hold, stuck_accepted_offers
from waitlist.dispatch.vacancies import vacancies_dispatch
from waitlist.effects import event_append
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    DecisionGate,
    DecisionStatus,
    JobRun,
    Offer,
    OfferEvent,
    OfferStatus,
    Vacancy,
    VacancyStatus,
    WaitlistPolicy,
)
from waitlist.offers.booking import offer_book
from waitlist.offers.offers import offers_expire_due
from waitlist.offers.recovery import offer_close_without_hold
from waitlist.reliability.feed import get_decision_provider

logger = logging.getLogger("waitlist")

JOB_EXPIRE = "expire"
JOB_RECONCILE = "reconcile"


def job_record(name: str, *, now: datetime, result: dict, cursor: int | None = None) -> None:
    """Remember the job's last run (readiness evidence on the ops snapshot)."""
    defaults = {"last_run_at": now, "last_result": result}
    if cursor is not None:
        defaults["cursor"] = cursor
    JobRun.objects.update_or_create(name=name, defaults=defaults)


def expire_run(*, now: datetime | None = None, limit: int | None = None) -> dict:
    """Expire up to ``limit`` due OFFERED offers (their holds are released, the vacancy cascades)."""
    now = now or timezone.now()
    limit = limit or int(getattr(settings, "WAITLIST_EXPIRE_BATCH", 100))
    result = {"expired": offers_expire_due(now=now, limit=limit)}
    job_record(JOB_EXPIRE, now=now, result=result)
    return result


def review_ready_vacancies(now: datetime):
    """REVIEW vacancies that need staff no longer: the clinic's decision gate is now NOT_USED, or the
    reviewed candidate's newest decision is FRESH. Dispatch runs them again (it offers that candidate)."""
    latest_policy = WaitlistPolicy.objects.filter(clinic=OuterRef("clinic")).order_by("-version")
    in_review = Vacancy.objects.filter(status=VacancyStatus.REVIEW).select_related("clinic").annotate(
        gate=Subquery(latest_policy.values("decision_gate")[:1]), patient_in_review=F("review_entry__patient_id")
    )
    ready: list[int] = []
    gated: dict[int, list[tuple[int, int]]] = {}  # clinic id -> (vacancy id, reviewed patient id)
    clinics = {}
    for vacancy in in_review:
        if vacancy.gate == DecisionGate.NOT_USED:
            ready.append(vacancy.pk)
        elif vacancy.patient_in_review is not None:
            gated.setdefault(vacancy.clinic_id, []).append((vacancy.pk, vacancy.patient_in_review))
            clinics[vacancy.clinic_id] = vacancy.clinic
    for clinic_id, pairs in gated.items():  # the newest decisions through the provider: one batch per clinic
        decisions = get_decision_provider().decisions_for(
            clinic=clinics[clinic_id], patient_ids={patient for _v, patient in pairs}
        )
        fresh = {p for p, d in decisions.items() if d.effective_status(now) == DecisionStatus.FRESH}
        ready += [vacancy_id for vacancy_id, patient in pairs if patient in fresh]
    return Vacancy.objects.filter(pk__in=ready)


def reconcile_run(*, now: datetime | None = None, limit: int | None = None) -> dict:
    """One bounded reconcile pass (each step at most ``limit`` rows, each row its own transaction):

    1. due offers (an expiry run was missed): OFFERED past ``expires_at`` and ACCEPTED holds past their
       expiry → EXPIRED, hold released, cascade;
    2. OFFERED offers without an active hold → WITHDRAWN (``NO_ACTIVE_HOLD``), cascade;
    3. a booking command that started and did not finish (an ON_ACCEPT claim-page accept whose hold is
       still ACCEPTED ``WAITLIST_BOOKING_RETRY_MINUTES`` later) → finished once; if it still refuses,
       one ``BOOKING_STUCK`` event flags it for staff. Reconcile never books an ACCEPTED offer nobody
       asked to book (an API client's claim, a BOOKING_COMMAND clinic): that hold ends at its expiry
       (step 1: ACCEPTED → EXPIRED ``HOLD_EXPIRED``, capacity released, cascade);
    4. vacancies with no active offer that should have one (OPEN, not started; REVIEW whose review is
       moot: see ``review_ready_vacancies``) → ``vacancy_dispatch`` (DISABLED while the flag is off;
       WAITING during quiet hours; ALREADY_OFFERED if someone else won: never a second offer); started
       ones are CLOSED. A keyset cursor (``JobRun.cursor``) resumes where the last run stopped.
    """
    now = now or timezone.now()
    limit = limit or int(getattr(settings, "WAITLIST_RECONCILE_BATCH", 50))
    correlation_id = new_correlation_id()
    counts: dict = {"expired": offers_expire_due(now=now, limit=limit),
                    "withdrawn_no_hold": _repair_offers_without_hold(now, limit, correlation_id)}
    counts["booked"], counts["flagged_stuck"] = _finish_stuck_bookings(now, limit, correlation_id)
    counts["dispatch"], next_cursor = _dispatch_missing_offers(now, limit, correlation_id)
    job_record(JOB_RECONCILE, now=now, result=counts, cursor=next_cursor)
    logger.info("reconcile correlation=%s %s", correlation_id, counts)
    return counts


def _repair_offers_without_hold(now: datetime, limit: int, correlation_id: str) -> int:
    """Step 2: OFFERED offers whose hold is gone → WITHDRAWN (``NO_ACTIVE_HOLD``), cascade. Returns how many."""
    repaired = 0
    broken = offers_without_active_hold().filter(status=OfferStatus.OFFERED).select_related("clinic")
    for offer in broken.order_by("id")[:limit]:
        try:
            if offer_close_without_hold(clinic=offer.clinic, offer_id=offer.pk, now=now,
                                        correlation_id=correlation_id):
                repaired += 1
        except DomainError as exc:
            logger.info("reconcile: offer %s not repaired: %s", offer.ref, exc.code)
    return repaired


def _finish_stuck_bookings(now: datetime, limit: int, correlation_id: str) -> tuple[int, int]:
    """Step 3: booking commands that started and did not finish, finished once or flagged once
    (``BOOKING_STUCK``). Returns (booked, flagged)."""
    booked = flagged = 0
    flagged_already = OfferEvent.objects.filter(offer=OuterRef("pk"), reason_code="BOOKING_STUCK")
    stuck = (
        stuck_accepted_offers(now=now).exclude(Exists(flagged_already)).select_related("clinic", "hold")
        .order_by("updated_at", "id")[:limit]
    )
    for offer in stuck:
        try:
            offer_book(clinic=offer.clinic, hold_ref=offer.hold.ref, now=now, correlation_id=correlation_id)
            booked += 1
        except DomainError as exc:
            with transaction.atomic():
                event_append(offer=offer, from_status=offer.status, to_status=offer.status,
                             reason_code="BOOKING_STUCK", actor="system:reconcile", correlation_id=correlation_id,
                             now=now, detail={"hold": offer.hold.ref, "code": exc.code})
            flagged += 1
    return booked, flagged


def _dispatch_missing_offers(now: datetime, limit: int, correlation_id: str) -> tuple[dict[str, int], int]:
    """Step 4: vacancies with no active offer that should have one, a bounded batch from the keyset cursor
    (``JobRun.cursor``, wrapping around), each dispatched. Returns the outcomes counted and the next cursor."""
    cursor = JobRun.objects.filter(name=JOB_RECONCILE).values_list("cursor", flat=True).first() or 0
    has_active = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)
    candidates = (
        Vacancy.objects.filter(status__in=DISPATCHABLE_VACANCY_STATUSES)
        .filter(
            Q(status=VacancyStatus.OPEN) | Q(starts_at__lte=now) | Q(pk__in=review_ready_vacancies(now).values("pk"))
        )
        .exclude(Exists(has_active))
    )
    batch = list(candidates.filter(pk__gt=cursor).order_by("pk")[:limit])
    if len(batch) < limit:  # wrap around: the next run starts from the beginning again
        seen = {v.pk for v in batch}
        batch += [v for v in candidates.order_by("pk")[: limit - len(batch)] if v.pk not in seen]
        next_cursor = 0
    else:
        next_cursor = batch[-1].pk
    outcomes: dict[str, int] = {}
    # Claimed one at a time (SKIP LOCKED): two reconcile runs at once split the batch between them.
    for _vacancy_id, result in vacancies_dispatch(vacancy_ids=[v.pk for v in batch], now=now,
                                                  correlation_id=correlation_id):
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
    return outcomes, next_cursor
