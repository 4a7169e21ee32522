"""Recovery commands (ARCHITECTURE.md flow 9: a command with a reason and a correlation id, never
manual SQL): close or reopen a vacancy, retry a stuck booking, resolve a vacancy in staff review.
Staff withdrawal of an offer is ``offer_withdraw``. Each writes the offer's event rows (actor, reason
code, correlation id) where an offer changes, and one ``AuditEntry`` (actor, free-text reason,
correlation id, result) always.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast

from django.db import transaction
from django.utils import timezone

from common.cas import cas_update
from common.errors import Conflict, DomainError, NotFound, ValidationFailed, VersionConflict
from common.services import actor_label, audit_record, new_correlation_id
from scheduling.models import Appointment, Clinic, HoldStatus
from waitlist.dispatch import matcher
from waitlist.dispatch.locks import lock_entry, lock_offer_chain, lock_vacancy
from waitlist.dispatch.promotion import RESTART, DispatchResult, close_offer, offer_next, promote
from waitlist.dispatch.vacancies import vacancy_dispatch
from waitlist.effects import command_audit, event_append, queue_dispatch
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    DecisionStatus,
    Offer,
    OfferStatus,
    Vacancy,
    VacancySkip,
    VacancyStatus,
)
from waitlist.offers.booking import offer_book
from waitlist.policy.services import policy_current
from waitlist.reliability.feed import Decision, get_decision_provider
from waitlist.rules.terms import APPLIES, NO_STANDING, standing_outcome
from waitlist.standing.services import standing_notice


def _vacancy_id(clinic: Clinic, vacancy_ref) -> int:
    if not isinstance(vacancy_ref, str) or not vacancy_ref:
        raise NotFound()
    found = Vacancy.objects.filter(clinic=clinic, ref=vacancy_ref).values_list("pk", flat=True).first()
    if found is None:
        raise NotFound()
    return found


def _locked(clinic: Clinic, vacancy_ref) -> Vacancy:
    """Inside the command's transaction: the vacancy ``vacancy_ref`` names in ``clinic``, locked (else 404)."""
    return lock_vacancy(_vacancy_id(clinic, vacancy_ref))


def vacancy_close(*, clinic: Clinic, vacancy_ref: str, actor, reason: str, now: datetime | None = None,
                  correlation_id: str = "", idempotency_key: str = "") -> tuple[Vacancy, Offer | None]:
    """OPEN/REVIEW → CLOSED (``STAFF_CLOSED``); an active, unbooked offer is withdrawn with it
    (reason ``VACANCY_CLOSED``, hold released, entry back to WAITING). Closing a CLOSED vacancy is a
    no-op; a FILLED one (or one whose offer is booked) is 409 ``VACANCY_NOT_CLOSABLE``."""
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    with transaction.atomic():
        vacancy = _locked(clinic, vacancy_ref)
        if vacancy.status == VacancyStatus.CLOSED:
            return vacancy, None
        if vacancy.status == VacancyStatus.FILLED:
            raise Conflict("The vacancy is filled.", code="VACANCY_NOT_CLOSABLE")
        active = Offer.objects.filter(vacancy=vacancy, status__in=ACTIVE_OFFER_STATUSES).first()
        withdrawn = None
        if active is not None:
            # Same transaction, same order: the vacancy row is already ours, so this re-lock is free.
            locks = lock_offer_chain(clinic=clinic, offer_id=active.pk)
            if locks.hold.status == HoldStatus.CONSUMED:
                raise Conflict("The vacancy's offer is booked.", code="VACANCY_NOT_CLOSABLE")
            # Close the vacancy first so the offer's close does not queue a cascade.
            cas_update(locks.vacancy, expected_status=locks.vacancy.status, status=VacancyStatus.CLOSED,
                       close_reason="STAFF_CLOSED")
            withdrawn = close_offer(locks, to_status=OfferStatus.WITHDRAWN, reason_code="VACANCY_CLOSED",
                                    actor=actor_label(actor, "recover"), correlation_id=correlation_id, now=now)
            vacancy = locks.vacancy
        else:
            cas_update(vacancy, expected_status=vacancy.status, status=VacancyStatus.CLOSED,
                       close_reason="STAFF_CLOSED")
        command_audit(vacancy, action="vacancy_close", actor=actor, clinic=clinic, reason=reason,
                      correlation_id=correlation_id, idempotency_key=idempotency_key, system_label="recover",
                      withdrawn_offer=withdrawn.ref if withdrawn else None)
        return vacancy, withdrawn


def vacancy_reopen(*, clinic: Clinic, vacancy_ref: str, actor, reason: str, now: datetime | None = None,
                   correlation_id: str = "", idempotency_key: str = "") -> Vacancy:
    """CLOSED or REVIEW → OPEN and dispatch again after commit. Reopening an OPEN vacancy is a no-op
    (a dispatch is still queued); FILLED is 409 ``VACANCY_NOT_REOPENABLE``; a started one is 409
    ``VACANCY_STARTED``. Capacity is never assumed free: dispatch places a new hold, and the
    exclusion constraint closes the vacancy again (``SLOT_TAKEN``) if the time was booked meanwhile."""
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    with transaction.atomic():
        vacancy = _locked(clinic, vacancy_ref)
        if vacancy.status == VacancyStatus.FILLED:
            raise Conflict("The vacancy is filled.", code="VACANCY_NOT_REOPENABLE")
        if vacancy.starts_at <= now:
            raise Conflict("The vacancy's time has started.", code="VACANCY_STARTED")
        if vacancy.status != VacancyStatus.OPEN:
            # A late yes kept before the close is over with it (the patient's page said the time ended).
            cas_update(vacancy, expected_status=vacancy.status, status=VacancyStatus.OPEN, close_reason="",
                       review_entry=None, late_yes_offer=None)
        command_audit(vacancy, action="vacancy_reopen", actor=actor, clinic=clinic, reason=reason,
                      correlation_id=correlation_id, idempotency_key=idempotency_key, system_label="recover")
        queue_dispatch(vacancy.pk)
        return vacancy


def vacancy_redispatch(*, clinic: Clinic, vacancy_ref: str, actor, reason: str, now: datetime | None = None,
                       correlation_id: str = "", idempotency_key: str = "") -> DispatchResult:
    """Staff ask for dispatch again (``vacancy_dispatch`` with the actor on its events) and the ask is
    audited with the reason and the outcome. Safe to repeat and to race: at most one offer results
    (``ALREADY_OFFERED`` for the loser); a closed vacancy answers ``CLOSED``."""
    correlation_id = correlation_id or new_correlation_id()
    _vacancy_id(clinic, vacancy_ref)  # scope first: a foreign ref is a plain 404
    result = vacancy_dispatch(clinic=clinic, vacancy_ref=vacancy_ref, actor=actor, now=now,
                              correlation_id=correlation_id)
    audit_record(actor=actor, action="waitlist.vacancy_redispatch", clinic=clinic, target_ref=vacancy_ref,
                 reason=reason, correlation_id=correlation_id, idempotency_key=idempotency_key,
                 result={"outcome": result.outcome, "offer": result.offer.ref if result.offer else None},
                 system_label="recover")
    return result


@dataclass(frozen=True)
class BookingRetry:
    """``appointment``: the hold is booked (now, or before: the command is idempotent). ``refusal``: the
    booking command refused (its typed error); the refusal is recorded and committed, not raised."""

    appointment: Appointment | None = None
    refusal: DomainError | None = None

    def booked(self) -> Appointment:
        """The appointment, or the recorded refusal raised (front ends that answer with the error)."""
        if self.refusal is not None:
            raise self.refusal
        if self.appointment is None:
            raise LookupError("a booking retry with neither an appointment nor a refusal")
        return self.appointment


def hold_retry_booking(
    *,
    clinic: Clinic,
    hold_ref: str,
    actor,
    reason: str,
    now: datetime | None = None,
    correlation_id: str = "",
    idempotency_key: str = "",
) -> BookingRetry:
    """Run the booking command again for an ACCEPTED hold (idempotent: a booked hold answers its
    appointment). A refusal is recorded (event ``BOOKING_RETRY_FAILED`` with the code, and the audit row)
    in this command's own transaction and returned, so a caller cannot roll the record back by raising it.
    An unknown or foreign hold is NotFound (nothing written)."""
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    offer = (
        Offer.objects.filter(clinic=clinic, hold__ref=hold_ref if isinstance(hold_ref, str) else "")
        .only("pk", "ref", "status", "clinic_id", "correlation_id")
        .first()
    )
    if offer is None:
        raise NotFound()
    audit = {"actor": actor, "action": "waitlist.booking_retry", "clinic": clinic, "target_ref": hold_ref,
             "reason": reason, "correlation_id": correlation_id, "idempotency_key": idempotency_key,
             "system_label": "recover"}
    try:
        appointment, created = offer_book(
            clinic=clinic, hold_ref=hold_ref, actor=actor, now=now, correlation_id=correlation_id
        )
    except DomainError as exc:
        with transaction.atomic():
            event_append(offer=offer, from_status=offer.status, to_status=offer.status,
                         reason_code="BOOKING_RETRY_FAILED", actor=actor_label(actor, "recover"),
                         correlation_id=correlation_id, now=now, detail={"hold": hold_ref, "code": exc.code})
            audit_record(**audit, result={"code": exc.code})
        return BookingRetry(refusal=exc)
    audit_record(**audit, result={"appointment": appointment.ref, "created": created, "status": appointment.status})
    return BookingRetry(appointment=appointment)


def offer_close_without_hold(*, clinic: Clinic, offer_id: int, now: datetime, correlation_id: str) -> Offer | None:
    """Reconcile's repair of invariant 2: an OFFERED offer whose hold no longer reserves the slot is
    WITHDRAWN (``NO_ACTIVE_HOLD``) so the vacancy cascades. Anything else is left for staff."""
    with transaction.atomic():
        locks = lock_offer_chain(clinic=clinic, offer_id=offer_id)
        if locks.offer.status != OfferStatus.OFFERED:
            return None
        if locks.hold.status == HoldStatus.ACTIVE and locks.hold.allocations.filter(active=True).exists():
            return None  # repaired meanwhile
        return close_offer(locks, to_status=OfferStatus.WITHDRAWN, reason_code="NO_ACTIVE_HOLD",
                            actor="system:reconcile", correlation_id=correlation_id, now=now)


# --- staff review of a REVIEW vacancy (a STALE/UNAVAILABLE decision stopped automatic promotion) ---

REVIEW_RESOLUTIONS = ("PROMOTE", "SKIP")


@dataclass(frozen=True)
class ReviewResult:
    """``outcome``: PROMOTE → ``OFFERED``, ``BOOKED`` (a standing acceptance, as dispatch books it) or ``CLOSED``
    (the slot was taken meanwhile);
    SKIP → the next dispatch's outcome (``OFFERED``, ``STAFF_REVIEW``, ``NO_CANDIDATE``, ``CLOSED``)."""

    vacancy: Vacancy
    resolution: str
    outcome: str
    reviewed_entry: str
    offer: Offer | None = None
    #: PROMOTE of a candidate with a standing acceptance: BOOKED, or why it did not apply (POLICY_OFF, MIN_NOTICE).
    standing: str = ""


def vacancy_review_resolve(
    *,
    clinic: Clinic,
    vacancy_ref: str,
    actor,
    reason: str,
    resolution: str,
    expected_version: int | None = None,
    now: datetime | None = None,
    correlation_id: str = "",
    idempotency_key: str = "",
) -> ReviewResult:
    """Staff resolve a vacancy in REVIEW (its best candidate's decision was STALE or UNAVAILABLE).

    ``PROMOTE``: staff accept that candidate despite the non-fresh decision. Under the vacancy fence
    the entry is re-checked (full hard eligibility: 409 ``CANDIDATE_INELIGIBLE`` with the code) and
    promoted with dispatch's own offer transaction (hold, offer, entry, vacancy, ``MATCHED`` event,
    outbox). The staff review stands in for freshness for this offer only: the offer records the
    reviewed decision as it was with ``staff_reviewed`` set (which the claim accepts in place of a
    FRESH status), and a ``STAFF_REVIEWED`` event (+ the audit row) records what was reviewed
    (``reviewed_decision_status``), by whom and why. A newer decision recorded later still wins at
    claim time, as for any offer. A candidate with a standing acceptance is booked at once (outcome ``BOOKED``)
    by dispatch's own rule (``terms.standing_outcome``); when that rule says no (the policy has it off, the
    slot is inside their minimum notice) the offer is ordinary and its history says why (``_review_standing``).

    ``SKIP``: pass over that candidate and dispatch the vacancy to the next one, in the same
    transaction (the fence is held throughout; a FRESH_READ policy is treated as staff review here,
    so no provider call runs under the lock). A ``VacancySkip`` row keeps the entry out of every later
    dispatch of this vacancy.

    Refusals (nothing changed): unknown/foreign ref 404; not REVIEW → 409 ``VACANCY_NOT_IN_REVIEW``;
    ``expected_version`` differs → 409 ``VERSION_CONFLICT``; started → 409 ``VACANCY_STARTED``;
    a bad resolution → 400. Lock order: vacancy → (hold placed) → entry, as in dispatch.
    """
    if resolution not in REVIEW_RESOLUTIONS:
        raise ValidationFailed("Resolution must be PROMOTE or SKIP.", fields={"resolution": ["PROMOTE or SKIP."]})
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    label = actor_label(actor, "review")
    with transaction.atomic():
        vacancy = _reviewable(clinic, vacancy_ref, expected_version=expected_version, now=now)
        policy = policy_current(clinic=clinic)
        entry = lock_entry(cast(int, vacancy.review_entry_id))  # after the vacancy: the fixed lock order
        reviewed, evidence = _review_evidence(clinic, entry, policy, resolution=resolution, now=now)
        if resolution == "PROMOTE":
            result = _review_promote(vacancy, entry, reviewed, policy, now=now, label=label,
                                     correlation_id=correlation_id)
            evidence.update(_review_standing(result, entry, vacancy, policy, now=now, label=label,
                                             correlation_id=correlation_id))
        else:
            result = _review_skip_past(vacancy, entry, policy, now=now, label=label, correlation_id=correlation_id)
        offer = result.offer if result.outcome in ("OFFERED", "BOOKED") else None
        if offer is not None:
            event_append(offer=offer, from_status=offer.status, to_status=offer.status, reason_code="STAFF_REVIEWED",
                         actor=label, correlation_id=correlation_id, now=now, detail=evidence)
        vacancy.refresh_from_db(fields=["status", "version", "review_entry", "close_reason"])
        command_audit(vacancy, action="vacancy_review_resolve", actor=actor, clinic=clinic, reason=reason,
                      correlation_id=correlation_id, idempotency_key=idempotency_key, system_label="review",
                      **evidence, outcome=result.outcome, offer=offer.ref if offer else None)
        return ReviewResult(vacancy=vacancy, resolution=resolution, outcome=result.outcome,
                            reviewed_entry=entry.ref, offer=offer, standing=evidence.get("standing", ""))


def _reviewable(clinic: Clinic, vacancy_ref: str, *, expected_version: int | None, now: datetime) -> Vacancy:
    """The vacancy locked, refused unless it waits in staff review, unchanged, not started, with no offer out."""
    vacancy = _locked(clinic, vacancy_ref)
    if vacancy.status != VacancyStatus.REVIEW or vacancy.review_entry_id is None:
        raise Conflict(f"The vacancy is {vacancy.status}, not in staff review.", code="VACANCY_NOT_IN_REVIEW")
    if expected_version is not None and vacancy.version != expected_version:
        raise VersionConflict("The vacancy was changed; reload it.")
    if vacancy.starts_at <= now:
        raise Conflict("The vacancy's time has started.", code="VACANCY_STARTED")
    if Offer.objects.filter(vacancy=vacancy, status__in=ACTIVE_OFFER_STATUSES).exists():
        raise Conflict("The vacancy already has an active offer.", code="ALREADY_OFFERED")
    return vacancy


def _review_evidence(clinic: Clinic, entry, policy, *, resolution: str, now: datetime) -> tuple[Decision | None, dict]:
    """The decision staff reviewed (as the provider has it now) and what the event and audit row record of it."""
    reviewed = get_decision_provider().decisions_for(clinic=clinic, patient_ids=[entry.patient_id]).get(
        entry.patient_id
    )
    reviewed_status = reviewed.effective_status(now) if reviewed else DecisionStatus.UNAVAILABLE
    return reviewed, {
        "resolution": resolution,
        "entry": entry.ref,
        "reviewed_decision_ref": reviewed.decision_ref if reviewed else "",
        "reviewed_decision_status": reviewed_status,
        "policy_version": policy.version,
    }


def _review_skip_past(vacancy: Vacancy, entry, policy, *, now: datetime, label: str, correlation_id: str):
    """SKIP: resolve the review first (REVIEW → OPEN, version + 1), record the skip so no later dispatch of this
    vacancy offers the entry again, then dispatch past it."""
    cas_update(vacancy, expected_status=VacancyStatus.REVIEW, status=VacancyStatus.OPEN, review_entry=None)
    VacancySkip.objects.get_or_create(
        clinic_id=vacancy.clinic_id, vacancy=vacancy, entry=entry,
        defaults={"actor": label, "correlation_id": correlation_id},
    )
    return _review_skip(vacancy, entry, policy, now=now, label=label, correlation_id=correlation_id)


def _review_promote(
    vacancy: Vacancy, entry, reviewed: Decision | None, policy, *, now: datetime, label: str, correlation_id: str
) -> DispatchResult:
    why = matcher.ineligibility(entry=entry, vacancy=vacancy, policy=policy, now=now)
    if why is not None:
        raise Conflict(f"The candidate is no longer eligible ({why}).", code="CANDIDATE_INELIGIBLE")
    candidate = matcher.Candidate(
        entry_id=entry.pk,
        entry_ref=entry.ref,
        patient_id=entry.patient_id,
        version=entry.version,
        slot_fit=1 if entry.practitioner_id == vacancy.practitioner_id else 0,
        priority_rank=entry.priority_rank,
        waiting_since=entry.waiting_since,
        decision=reviewed,
    )
    # Dispatch's own offer transaction; the staff review stands in for freshness, and the offer records
    # the reviewed decision as it really is.
    result = promote(vacancy, candidate, reviewed, policy, now=now, actor_label=label,
                     correlation_id=correlation_id, staff_reviewed=True)
    if result is None:  # cannot happen under our locks (re-checked above); refuse rather than guess
        raise Conflict("The candidate is no longer eligible.", code="CANDIDATE_INELIGIBLE")
    if result.outcome == RESTART:
        raise Conflict("The clinic's policy changed; reload and review again.", code="POLICY_CHANGED")
    if result.outcome == "ALREADY_OFFERED":
        raise Conflict("The vacancy already has an active offer.", code="ALREADY_OFFERED")
    return result


def _review_standing(result: DispatchResult, entry, vacancy: Vacancy, policy, *, now: datetime, label: str,
                     correlation_id: str) -> dict:
    """What PROMOTE did with the candidate's standing acceptance ("book me automatically"), by dispatch's own rule
    (``terms.standing_outcome``): ``{"standing": "BOOKED"}``; or, when it did not apply, the reason (POLICY_OFF,
    MIN_NOTICE), also kept in the offer's history as a ``STANDING_<reason>`` event; nothing when there was none."""
    offer = result.offer
    if offer is None:
        return {}
    if offer.standing:
        return {"standing": "BOOKED"}
    why = standing_outcome(policy, standing_notice(entry.pk), starts_at=vacancy.starts_at, now=now)
    if why in (NO_STANDING, APPLIES):
        return {}
    event_append(offer=offer, from_status=offer.status, to_status=offer.status, reason_code=f"STANDING_{why}",
                 actor=label, correlation_id=correlation_id, now=now, detail={"entry": entry.ref})
    return {"standing": why}


def _review_skip(
    vacancy: Vacancy, skipped, policy, *, now: datetime, label: str, correlation_id: str
) -> DispatchResult:
    """Dispatch's candidate loop under the fence; the matcher already passes over the skipped entry
    (``VacancySkip``), and reachability (quiet hours, contact caps) applies as in any dispatch."""
    result = offer_next(vacancy, now=now, actor_label=label, correlation_id=correlation_id, under_fence=True)
    if result.outcome == RESTART:  # the policy changed under the review: nothing of it is kept
        raise Conflict("The clinic's policy changed; reload and review again.", code="POLICY_CHANGED")
    return result
