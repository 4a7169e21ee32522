"""The write under the fence: lock the first free entry of a run with what its re-check reads (``lock_first_free``),
re-validate it, hold the slot and write the offer, its event and its notice in one statement (``promote_locked``).
Called by ``promotion._promote`` only, inside the transaction that holds the vacancy's lock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from psycopg.types.json import Jsonb

from common.cas import cas_conflict, cas_update, transition_sources
from common.errors import PatientOverlap, SlotOccupied
from common.fastpath import insert_sql, saved
from common.models import OutboxMessage
from common.notify import contact_cap_params
from common.services import outbox_message
from scheduling import services as scheduling
from scheduling.models import Patient
from waitlist import queries
from waitlist.dispatch import matcher
from waitlist.dispatch.fence import RESTART, UNREACHABLE, DispatchResult
from waitlist.effects import event_logged, note_record, slot_of
from waitlist.models import (
    OFFER_TOPIC,
    DecisionGate,
    DecisionStatus,
    EntryStatus,
    Offer,
    OfferStatus,
    Vacancy,
    VacancyStatus,
    WaitlistEntry,
    WaitlistPolicy,
)
from waitlist.reliability.feed import Decision
from waitlist.rules import eligibility
from waitlist.rules.reachability import reachability
from waitlist.rules.windows import (
    NO_OFFER_BEFORE,
    answer_deadline,
    unanswered_limit,
    unanswered_streak,
    window_rule,
)
from waitlist.shadow.services import shadow_observe, shadow_preview
from waitlist.standing.services import release_deadline, standing_applies, standing_book

logger = logging.getLogger("waitlist")

OFFER_TEMPLATE = "waitlist_offer"


_ENTRY_FIELDS = queries.ENTRY_FIELDS
_PATIENT_FIELDS = queries.PATIENT_FIELDS


def lock_first_free(
    run: list[matcher.Candidate], *, wait: bool, recheck: tuple[Vacancy, WaitlistPolicy, datetime] | None = None,
) -> tuple[WaitlistEntry | None, int, Rechecks | None]:
    """Lock (after the vacancy: the fixed order) the first entry of ``run`` that is still WAITING at the version
    it was read at and that no other transaction holds (``SKIP LOCKED``), with its patient (read, not locked)
    for the notice: one statement however many racing dispatchers hold the head of the queue. The entry carries
    ``standing_min_notice`` (its standing acceptance's minimum notice; None: it has none). Returns the
    entry (None: none free), how many of ``run`` that used up, and, with ``recheck`` (the locked vacancy, the
    policy and now), read in the same statement: the entry's hard-eligibility results (``matcher.checks_column``) and
    its patient's recent sends (for the contact cap, common's SQL function ``cw_recent_sends``).
    ``wait``: one candidate, its lock waited for.
    """
    params: dict[str, Any] = {}
    checks = recheck is not None
    if recheck is not None:
        vacancy, policy, now = recheck
        params = {**matcher.page_params(vacancy=vacancy, policy=policy, now=now),
                  **contact_cap_params(policy.contact_cap_per_day, now)}
    params.update(ids=[c.entry_id for c in run], versions=[c.version for c in run], unanswered_before=NO_OFFER_BEFORE,
                  unanswered_limit=unanswered_limit(recheck[1]) if recheck is not None else 0)
    row = queries.entry_lock_first_free(params, wait=wait, checks=checks)
    if row is None:
        return None, len(run), None
    width = len(_ENTRY_FIELDS)
    entry = WaitlistEntry.from_db(connection.alias, [f.attname for f in _ENTRY_FIELDS], row[:width])
    entry.standing_min_notice = row[width + 1]
    entry.unanswered_streak = row[width + 2] if checks else None
    patient = row[width + 3:width + 3 + len(_PATIENT_FIELDS)]
    entry.patient = Patient.from_db(connection.alias, list(_PATIENT_FIELDS), patient)
    return entry, row[width], Rechecks(row[-1], row[-2]) if checks else None


@dataclass(frozen=True)
class Rechecks:
    """What promotion re-checks of the entry it locked, read with the lock: every hard-eligibility rule's
    outcome and the patient's recent sends (the contact cap)."""

    checks: list[bool]
    sent: list[datetime]


def _offer_decision(decision: Decision | None, *, gated: bool, staff_reviewed: bool, now, expires_at) -> dict:
    """What the offer records of the decision it was made on. A staff-reviewed offer records the reviewed
    decision as it really is (``staff_reviewed`` stands in for freshness at claim time)."""
    if staff_reviewed:
        return {
            "decision_ref": decision.decision_ref if decision else "",
            "decision_status": decision.effective_status(now) if decision else DecisionStatus.UNAVAILABLE,
            "decision_priority_rank": decision.priority_rank if decision else 0,
            "decision_expires_at": decision.expires_at if decision else expires_at,
            "staff_reviewed": True,
        }
    if decision is None:
        raise ValueError("an automatic offer records the decision it was made on (NOT_USED when ungated)")
    return {
        "decision_ref": decision.decision_ref,
        "decision_status": DecisionStatus.FRESH if gated else DecisionStatus.NOT_USED,
        "decision_priority_rank": decision.priority_rank,
        "decision_expires_at": decision.expires_at,
        "staff_reviewed": False,
    }


@dataclass(frozen=True)
class Attempt:
    """What every step of one promotion under the fence reads: the policy it runs under and who runs it."""

    policy: WaitlistPolicy
    now: datetime
    actor_label: str
    correlation_id: str
    staff_reviewed: bool
    #: A late accept (``late_accept.offer_late_accept``): the patient's expired offer of this vacancy, whose yes
    #: came after its window. The new offer needs no notice and no reachability: the patient is answering now.
    renews: Offer | None = None


def promote_locked(locked: Vacancy, entry: WaitlistEntry, candidate: matcher.Candidate, decision: Decision | None,
                    rechecks: Rechecks | None, a: Attempt) -> DispatchResult | None:
    """Under the fence and the entry's lock: re-validate the candidate, hold the slot, write the offer (and book it
    at once on a standing acceptance). None: this candidate is no longer eligible (try the next one)."""
    policy, now = a.policy, a.now
    gated = policy.decision_gate == DecisionGate.REQUIRED
    stale = decision is None or decision.effective_status(now) != DecisionStatus.FRESH
    if gated and not a.staff_reviewed and stale:
        return DispatchResult(RESTART)
    reason = (
        eligibility.first_failed(rechecks.checks) if rechecks is not None
        else matcher.ineligibility(entry=entry, vacancy=locked, policy=policy, now=now,
                                   waived=eligibility.LATE_ACCEPT_WAIVED if a.renews is not None else ())
    )
    if reason is not None:
        logger.info("vacancy %s: %s no longer eligible (%s)", locked.ref, entry.ref, reason)
        return None
    # Staff review's PROMOTE books on a standing acceptance as dispatch does: staff vouched for the decision.
    standing = a.renews is None and standing_applies(
        policy, entry.standing_min_notice, starts_at=locked.starts_at, now=now)
    answered = standing or a.renews is not None  # the patient's yes is already given: nothing to ask or send
    if not a.staff_reviewed and not answered:
        # Checked once the entry is ours (not before): a racer that finds the entry locked or taken moves on
        # without reading the patient's notices first. A standing booking needs no answer: its notice waits in
        # the outbox for quiet hours and the daily cap like any other.
        unreachable = reachability(policy=policy, clinic=locked.clinic, now=now, patient_ref=entry.patient.ref,
                                   sent=rechecks.sent if rechecks is not None else None)
        if unreachable is not None:
            note_record(vacancy=locked, entry_id=entry.pk, reason_code=unreachable.reason, until=unreachable.until,
                        now=now, correlation_id=a.correlation_id)
            return DispatchResult(UNREACHABLE, waiting=unreachable)
    known = getattr(entry, "unanswered_streak", None)  # read with the entry's lock (``lock_first_free``) or not
    unanswered = 0 if answered else known if known is not None else unanswered_streak(policy, entry.pk)
    rule = window_rule(policy, locked.clinic.timezone, unanswered=unanswered)
    expires_at = answer_deadline(rule, start=now, slot_starts_at=locked.starts_at)
    shadow = shadow_preview(vacancy=locked, entry=entry, policy=policy, now=now) if locked.has_shadow else None
    hold, refused = _place_hold(locked, entry, expires_at)
    if hold is None:
        return refused
    shadow_observe(preview=shadow, correlation_id=a.correlation_id)
    offer = _new_offer(locked, entry, candidate, decision, hold, a, expires_at=expires_at, standing=standing,
                       gated=gated)
    _offer_write(locked, offer, entry, candidate, _offer_detail(offer, candidate, a), actor_label=a.actor_label,
                 correlation_id=a.correlation_id, now=now, notice=not answered)
    if standing:
        standing_book(locked, offer, entry, actor=a.actor_label, correlation_id=a.correlation_id, now=now)
        return DispatchResult("BOOKED", offer)
    return DispatchResult("OFFERED", offer)


def _place_hold(locked: Vacancy, entry: WaitlistEntry, expires_at: datetime):
    """``(hold, None)``, or ``(None, result)`` when the slot cannot be held for this patient: None (the patient
    booked or was offered an overlapping time meanwhile: next candidate) or CLOSED (someone booked the time
    directly: the exclusion constraint says the slot is gone, and the vacancy closes)."""
    try:
        return scheduling.hold_place(clinic=locked.clinic, patient_id=entry.patient_id, expires_at=expires_at,
                                     **slot_of(locked)), None
    except PatientOverlap:
        logger.info("vacancy %s: %s passed over (PATIENT_OVERLAP)", locked.ref, entry.ref)
        return None, None
    except SlotOccupied:
        cas_update(locked, expected_status=locked.status, status=VacancyStatus.CLOSED, close_reason="SLOT_TAKEN")
        return None, DispatchResult("CLOSED")


def _new_offer(locked: Vacancy, entry: WaitlistEntry, candidate: matcher.Candidate, decision: Decision | None, hold,
               a: Attempt, *, expires_at: datetime, standing: bool, gated: bool) -> Offer:
    """The offer row (not yet written): the policy version and digest it runs under and the decision it rests on."""
    policy, now = a.policy, a.now
    return Offer(
        clinic_id=locked.clinic_id,
        tenant_group_id=locked.tenant_group_id,
        vacancy=locked,
        entry=entry,
        patient_id=entry.patient_id,
        hold=hold,
        expires_at=expires_at,
        policy=policy,
        policy_version=policy.version,
        policy_digest=policy.digest(),
        slot_fit=candidate.slot_fit,
        correlation_id=a.correlation_id,
        created_at=now,
        standing=standing,
        release_until=release_deadline(policy, booked_at=now, starts_at=locked.starts_at) if standing else None,
        renews=a.renews,
        **_offer_decision(decision, gated=gated, staff_reviewed=a.staff_reviewed, now=now, expires_at=expires_at),
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
    late yes kept),
    the offer, its MATCHED event and its notice, in one statement (``queries.offer_write``). ``notice=False``: a
    standing booking, whose notice is the booking's, not the offer's."""
    entry_sources = transition_sources(WaitlistEntry, EntryStatus.OFFERED, EntryStatus.WAITING)
    vacancy_sources = transition_sources(Vacancy, VacancyStatus.OPEN, vacancy.status)
    event_correlation = correlation_id or offer.correlation_id
    offer_id, entries, vacancies = queries.offer_write(
        entry=(EntryStatus.OFFERED, entry.pk, candidate.version, entry_sources),
        vacancy=(VacancyStatus.OPEN, vacancy.pk, vacancy.version, vacancy_sources),
        offer_insert=insert_sql(offer),
        event=[offer.clinic_id, "", OfferStatus.OFFERED, "MATCHED", actor_label, event_correlation, Jsonb(detail),
               now],
        notice_insert=(insert_sql(_notice(vacancy, offer, entry, offer.hold, correlation_id=correlation_id))
                       if notice else None),
    )
    if entries != 1:
        raise cas_conflict(WaitlistEntry, entry.pk, version=candidate.version, sources=entry_sources)
    if vacancies != 1:
        raise cas_conflict(Vacancy, vacancy.pk, version=vacancy.version, sources=vacancy_sources)
    saved(offer, offer_id)
    entry.status, entry.version = EntryStatus.OFFERED, candidate.version + 1
    vacancy.status, vacancy.version = VacancyStatus.OPEN, vacancy.version + 1
    vacancy.review_entry, vacancy.waiting_reason, vacancy.waiting_until = None, "", None
    vacancy.late_yes_offer = None  # any new offer uses up a late yes: taken up, or tried and passed over
    event_logged(offer=offer, from_status="", to_status=OfferStatus.OFFERED, reason_code="MATCHED",
                 actor=actor_label, correlation_id=event_correlation)


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
