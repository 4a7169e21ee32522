"""Promotion under the vacancy's fence, in three steps: read, decide, write (issue 42).

``promote_first_free`` (the candidate loop's, and staff review's PROMOTE through ``promotion.promote``) runs them in a
transaction of its own; ``promote_locked`` (a late accept's, which holds the fence already) the last two:

1. **read**: ``fence.fenced_first_free``, one call: the fence (the vacancy's lock), then the first entry of a run of
   candidates that no other transaction holds, locked in one statement with everything the decision needs
   (``terms.EntryFacts``: the hard rules' outcomes, the patient's recent sends, the unanswered streak, the standing
   acceptance);
2. **decide**: ``terms.offer_terms``, plain Python: whether the candidate may still be offered and on what terms
   (booked at once or asked, the answer deadline, the release deadline, the decision and policy the offer records);
3. **write**: the hold (scheduling's ``hold_place``), the shadow policy's observation, one statement for the entry,
   the vacancy, the offer, its event and its notice (``_offer_write``), and a standing acceptance's booking.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from psycopg.types.json import Jsonb

from common.cas import cas_conflict, cas_update
from common.errors import PatientOverlap, SlotOccupied
from common.fastpath import insert_sql, saved
from common.models import OutboxMessage
from common.services import outbox_message
from scheduling import services as scheduling
from waitlist import queries
from waitlist.dispatch import matcher
from waitlist.dispatch.fence import (
    RESTART,
    UNREACHABLE,
    Attempt,
    DispatchResult,
    Run,
    active_offer,
    fenced_first_free,
)
from waitlist.effects import EVENT_LOG, note_record, slot_of
from waitlist.models import (
    OFFER_TOPIC,
    EntryStatus,
    Offer,
    OfferStatus,
    Vacancy,
    VacancyStatus,
    WaitlistEntry,
)
from waitlist.reliability.feed import Decision
from waitlist.rules import terms
from waitlist.shadow.services import shadow_observe, shadow_preview
from waitlist.standing.services import standing_book

logger = logging.getLogger("waitlist")

OFFER_TEMPLATE = "waitlist_offer"


def promote_first_free(vacancy: Vacancy, run: Run, a: Attempt, *, wait_for_entry: bool
                       ) -> tuple[DispatchResult | None, int]:
    """In a transaction of its own, under the vacancy's fence: ``promote_locked`` for the first of ``run``
    (candidates in order, each with the decision it is promoted on) that no other transaction holds. Returns the
    result and how many of ``run`` it used up (those passed over as held, and the one tried).

    The result is None when that candidate is no longer eligible (try the next one), ``UNREACHABLE`` (noted) when
    the patient cannot be reached now (contact cap), ``RESTART`` when the policy or (unless ``a.staff_reviewed``)
    the decision changed. ``wait_for_entry``: one candidate, its lock waited for (staff review); automatic dispatch
    passes over an entry another dispatcher holds (it is being promoted for another vacancy right now, so waiting
    on it would only queue every dispatcher behind one row).
    """
    used = 1
    try:
        with transaction.atomic():
            read = fenced_first_free(vacancy, run, a, wait=wait_for_entry)
            used = read.used
            if read.early is not None:
                return read.early, used
            if used > 1 or read.entry is None:
                # Other transactions hold the entries before it (promoting them for other vacancies right now):
                # pass over them, and say so, so "why was this candidate next" has an answer.
                held = [(c.entry_id, c.version) for c, _d in run[:used - (read.entry is not None)]]
                _notes_entry_locked(read.locked, held, now=a.now, correlation_id=a.correlation_id)
            if read.entry is None or read.facts is None:
                return None, used
            candidate, decision = run[used - 1]
            return promote_locked(read.locked, read.entry, candidate, decision, read.facts, a), used
    except IntegrityError:
        # Backstop: the partial unique index refused a second active offer. Read what won.
        active = active_offer(vacancy.pk)
        if active is None:
            raise
        return DispatchResult("ALREADY_OFFERED", active), used


def _notes_entry_locked(vacancy: Vacancy, entries: list[tuple[int, int]], *, now: datetime,
                        correlation_id: str) -> None:
    """``ENTRY_LOCKED`` notes (one per entry, as ``note_record``) for each of ``entries`` ((id, version) as read)
    that another transaction held when promotion passed over it, in one statement: racing dispatchers pass over
    many at once."""
    queries.dispatch_notes_entry_locked(clinic_id=vacancy.clinic_id, vacancy_id=vacancy.pk, entries=entries, now=now,
                                        correlation_id=correlation_id)
    logger.info("vacancy %s passes over %s held entries: ENTRY_LOCKED", vacancy.ref, len(entries))


def promote_locked(locked: Vacancy, entry: WaitlistEntry, candidate: matcher.Candidate, decision: Decision | None,
                   facts: terms.EntryFacts, a: Attempt) -> DispatchResult | None:
    """Under the fence and the entry's lock: the offer's terms (``terms.offer_terms``), then the hold and the offer
    (booked at once on a standing acceptance). None: this candidate is no longer eligible (try the next one)."""
    now = a.now
    t = terms.offer_terms(policy=a.policy, vacancy=locked, facts=facts, decision=decision, now=now,
                          staff_reviewed=a.staff_reviewed, late=a.renews is not None)
    if isinstance(t, terms.NoOffer):
        return _no_offer(locked, entry, t, a)
    shadow = shadow_preview(vacancy=locked, entry=entry, policy=a.policy, now=now) if locked.has_shadow else None
    hold, refused = _place_hold(locked, entry, t.expires_at, a.slot)
    if hold is None:
        return refused
    if shadow is not None:
        shadow_observe(preview=shadow, correlation_id=a.correlation_id)
    offer = _new_offer(locked, entry, candidate, hold, a, t)
    _offer_write(locked, offer, entry, candidate, _offer_detail(offer, candidate, a), actor_label=a.actor_label,
                 correlation_id=a.correlation_id, now=now, notice=t.notice)
    if t.outcome == terms.BOOK:
        standing_book(locked, offer, entry, actor=a.actor_label, correlation_id=a.correlation_id, now=now)
        return DispatchResult("BOOKED", offer)
    return DispatchResult("OFFERED", offer)


def _no_offer(locked: Vacancy, entry: WaitlistEntry, no: terms.NoOffer, a: Attempt) -> DispatchResult | None:
    """What promotion answers when the terms make no offer: RESTART; None (no longer eligible: the next candidate);
    UNREACHABLE, noted (the entry keeps its place)."""
    if no.outcome == terms.RESTART:
        return DispatchResult(RESTART)
    if no.unreachable is None:
        logger.info("vacancy %s: %s no longer eligible (%s)", locked.ref, entry.ref, no.reason)
        return None
    note_record(vacancy=locked, entry_id=entry.pk, reason_code=no.unreachable.reason, until=no.unreachable.until,
                now=a.now, correlation_id=a.correlation_id)
    return DispatchResult(UNREACHABLE, waiting=no.unreachable)


def _place_hold(locked: Vacancy, entry: WaitlistEntry, expires_at: datetime, slot: dict | None):
    """``(hold, None)``, or ``(None, result)`` when the slot cannot be held for this patient: None (the patient
    booked or was offered an overlapping time meanwhile: next candidate) or CLOSED (someone booked the time
    directly: the exclusion constraint says the slot is gone, and the vacancy closes)."""
    try:
        return scheduling.hold_place(clinic=locked.clinic, patient_id=entry.patient_id, expires_at=expires_at,
                                     **(slot if slot is not None else slot_of(locked))), None
    except PatientOverlap:
        logger.info("vacancy %s: %s passed over (PATIENT_OVERLAP)", locked.ref, entry.ref)
        return None, None
    except SlotOccupied:
        cas_update(locked, expected_status=locked.status, status=VacancyStatus.CLOSED, close_reason="SLOT_TAKEN")
        return None, DispatchResult("CLOSED")


def _new_offer(locked: Vacancy, entry: WaitlistEntry, candidate: matcher.Candidate, hold, a: Attempt,
               t: terms.OfferTerms) -> Offer:
    """The offer row (not yet written) on its terms: the policy version and digest it runs under and the decision
    it rests on."""
    policy = a.policy
    return Offer(
        clinic_id=locked.clinic_id,
        tenant_group_id=locked.tenant_group_id,
        vacancy=locked,
        entry=entry,
        patient_id=entry.patient_id,
        hold=hold,
        expires_at=t.expires_at,
        policy=policy,
        policy_version=policy.version,
        policy_digest=t.policy_digest,
        slot_fit=candidate.slot_fit,
        correlation_id=a.correlation_id,
        created_at=a.now,
        standing=t.outcome == terms.BOOK,
        release_until=t.release_until,
        renews=a.renews,
        **t.decision,
    )


def _offer_detail(offer: Offer, candidate: matcher.Candidate, a: Attempt) -> dict:
    """The MATCHED event's detail: refs, the policy version and digest, the decision (refs and codes only)."""
    return {
        "vacancy": offer.vacancy.ref,
        "entry": offer.entry.ref,
        "hold": offer.hold.ref,
        "slot_fit": candidate.slot_fit,
        "policy_version": a.policy.version,
        "policy_digest": offer.policy_digest,
        "decision_ref": offer.decision_ref,
        "decision_status": offer.decision_status,
        "decision_expires_at": offer.decision_expires_at.isoformat() if offer.decision_expires_at else None,
        **({"staff_reviewed": True} if a.staff_reviewed else {}),
        **({"standing": True} if offer.standing else {}),
        **({"renews": a.renews.ref} if a.renews is not None else {}),
    }


def _offer_write(vacancy: Vacancy, offer: Offer, entry: WaitlistEntry, candidate: matcher.Candidate, detail: dict,
                 *, actor_label: str, correlation_id: str, now: datetime, notice: bool = True) -> None:
    """Under the locks: entry WAITING → OFFERED and the vacancy's version bump (OPEN, no review, not waiting, no
    late yes kept), the offer, its MATCHED event and its notice, in one statement (``queries.offer_write``).
    ``notice=False``: a standing booking, whose notice is the booking's, not the offer's."""
    event_correlation = correlation_id or offer.correlation_id
    offer_id, entries, vacancies = queries.offer_write(
        entry=(entry.pk, candidate.version),
        vacancy=(vacancy.pk, vacancy.version),
        offer_insert=insert_sql(offer),
        event=[offer.clinic_id, "", OfferStatus.OFFERED, "MATCHED", actor_label, event_correlation, Jsonb(detail),
               now],
        notice_insert=(insert_sql(_notice(vacancy, offer, entry, offer.hold, correlation_id=correlation_id))
                       if notice else None),
    )
    if entries != 1:
        raise cas_conflict(WaitlistEntry, entry.pk, version=candidate.version, sources=queries.OFFER_WRITE_ENTRY_FROM)
    if vacancies != 1:
        raise cas_conflict(Vacancy, vacancy.pk, version=vacancy.version, sources=queries.OFFER_WRITE_VACANCY_FROM)
    saved(offer, offer_id)
    entry.status, entry.version = EntryStatus.OFFERED, candidate.version + 1
    vacancy.status, vacancy.version = VacancyStatus.OPEN, vacancy.version + 1
    vacancy.review_entry, vacancy.waiting_reason, vacancy.waiting_until = None, "", None
    vacancy.late_yes_offer = None  # any new offer uses up a late yes: taken up, or tried and passed over
    logger.info(EVENT_LOG, offer.ref, "-", OfferStatus.OFFERED, "MATCHED", actor_label, event_correlation)


def _notice(vacancy: Vacancy, offer: Offer, entry, hold, *, correlation_id: str) -> OutboxMessage:
    """The offer's notice for the outbox (written in the offer's statement; delivered after commit)."""
    patient = entry.patient
    return outbox_message(
        topic=OFFER_TOPIC,
        tenant_group_ref=vacancy.tenant_group.ref,
        clinic_ref=vacancy.clinic.ref,
        aggregate_ref=offer.ref,
        payload={
            "offer": offer.ref,
            "vacancy": vacancy.ref,
            "entry": entry.ref,
            "patient": patient.ref,
            "hold": hold.ref,
            "expires_at": offer.expires_at.isoformat(),
            "template": OFFER_TEMPLATE,
            "language": patient.language,
        },
        # Which channel, not the contact: the delivery worker resolves it at send time.
        channel="sms" if patient.phone else ("email" if patient.email else "none"),
        correlation_id=correlation_id,
        recipient_ref=patient.ref,
    )
