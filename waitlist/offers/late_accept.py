"""A late accept: the patient's yes came after their offer's window, and the time is still free.

Most answers that miss a window miss it by minutes (a patient reads the message on the bus), and the vacancy is
often still there: nobody else is being asked (the list ran out, the next candidate waits for quiet hours or for
staff) and the slot is hours away. Refusing that yes leaves the slot empty; ``offer_late_accept`` takes it up
instead, under the same rules as any offer: the vacancy's fence (no other offer out, the vacancy still open),
the patient's entry WAITING, every hard-eligibility rule, a FRESH decision where the clinic requires one, the
slot at least the answer margin away. It writes a new offer that names the expired one (``Offer.renews``) and
claims it in the same transaction; the caller books it (``accept.offer_late_accept_and_book``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from common.errors import Conflict, NotFound
from common.services import actor_label, audit_record, new_correlation_id
from scheduling.models import Clinic, Patient
from scheduling.services.features import feature_enabled
from waitlist.dispatch import matcher
from waitlist.dispatch.fence import RESTART, Attempt, fenced, lock_first_free
from waitlist.dispatch.locks import lock_offer_chain
from waitlist.dispatch.offer_write import promote_locked
from waitlist.dispatch.promotion import NOT_USED_DECISION, close_offer
from waitlist.effects import event_append
from waitlist.models import (
    DISPATCHABLE_VACANCY_STATUSES,
    DecisionGate,
    EntryStatus,
    Offer,
    OfferClaimReceipt,
    OfferStatus,
    Vacancy,
    WaitlistEntry,
    WaitlistPolicy,
)
from waitlist.offers.offers import expiry_due, offer_claim
from waitlist.policy.services import policy_current
from waitlist.reliability.feed import Decision, get_decision_provider
from waitlist.rules import eligibility
from waitlist.rules.terms import late_acceptable


@dataclass(frozen=True)
class LateAccept:
    offer: Offer  # the new (ACCEPTED) offer that renews the expired one; the expired one itself when ``kept``
    receipt: OfferClaimReceipt | None  # its claim (None: a repeat, or ``kept``)
    #: The time is offered to someone else right now: the yes is kept on the vacancy (``late_yes_offer``) and
    #: the vacancy's next dispatch takes it up first (``accept.late_yes_take_up``).
    kept: bool = False


_REFUSALS = {
    "LATE_ACCEPT_OFF": "This clinic does not take answers after an offer ended.",
    "OFFER_NOT_EXPIRED": "The offer is still open: claim it.",
    "LATE_ACCEPT_NOT_APPLICABLE": "Only an offer that ended unanswered can be accepted late.",
    "SLOT_TOO_SOON": "The slot starts too soon to be booked now.",
    "SLOT_OFFERED": "The time is being offered to someone else.",
    "SLOT_GONE": "The time is no longer free.",
    "ENTRY_NOT_WAITING": "The waiting-list entry is no longer waiting.",
    "NOT_ELIGIBLE": "The time no longer fits the waiting-list entry.",
    "DECISION_STALE": "The booking decision for this patient is not fresh.",
    "WAITLIST_DISABLED": "The waiting list is switched off for this clinic.",
}


def _refuse(code: str) -> Conflict:
    return Conflict(_REFUSALS[code], code=code)


def late_yes_drop(vacancy: Vacancy, old: Offer, *, code: str, correlation_id: str, now: datetime) -> None:
    """The kept yes of ``old`` is over (its take-up was refused with ``code``): cleared, with a
    ``LATE_YES_DROPPED`` event, in one conditional UPDATE (which takes the vacancy's lock); a yes another
    transaction replaced or used up meanwhile is left alone."""
    with transaction.atomic():
        if not Vacancy.objects.filter(pk=vacancy.pk, late_yes_offer_id=old.pk).update(late_yes_offer=None):
            return
        event_append(offer=old, from_status=old.status, to_status=old.status, reason_code="LATE_YES_DROPPED",
                     actor="system:dispatch", correlation_id=correlation_id, now=now,
                     detail={"vacancy": vacancy.ref, "refusal": code})


def offer_late_accept(
    *, clinic: Clinic, offer_ref: str, patient: Patient | None = None, actor=None, correlation_id: str = "",
    now: datetime | None = None, request_booking: bool = False, idempotency_key: str | None = None,
    system_label: str = "",
) -> LateAccept:
    """Take up an offer that ended unanswered (``late_acceptable``): a new offer of the same vacancy to the same
    entry, claimed at once (its hold ACCEPTED), with a ``LATE_ACCEPTED`` audit row. An offer still OFFERED past its
    deadline (the expiry job has not run) is expired first, in the same transaction. A repeat returns the renewal
    already made. While the time is offered to someone else the yes is kept instead (``LateAccept.kept``: the
    vacancy's next dispatch takes it up first). ``patient``: the claim page's owner check (someone else's offer
    looks missing). Refusals are 409s (``_REFUSALS``) and change nothing."""
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    label = system_label or ("patient" if patient is not None else actor_label(actor, "late_accept"))
    if not feature_enabled("waitlist", clinic):
        raise _refuse("WAITLIST_DISABLED")  # no new offer while the clinic's waiting list is off (invariant 8)
    with transaction.atomic():
        locks = lock_offer_chain(clinic=clinic, offer_ref=offer_ref)
        old = locks.offer
        if patient is not None and old.patient_id != patient.pk:
            raise NotFound()
        renewal = Offer.objects.filter(renews=old).first()
        if renewal is not None:
            return LateAccept(renewal, None)
        policy = policy_current(clinic=clinic)
        refusal = late_acceptable(old, locks.vacancy, policy, now)
        if refusal is not None:
            raise _refuse(refusal)
        if old.status == OfferStatus.OFFERED:
            if expiry_due(old, locks.hold, locks.vacancy, now) is None:
                raise _refuse("OFFER_NOT_EXPIRED")  # its notice is still held back: the window has not begun
            close_offer(locks, to_status=OfferStatus.EXPIRED, reason_code="EXPIRED", actor="system:expire",
                        correlation_id=correlation_id, now=now)
        locked, early = fenced(locks.vacancy, now)
        if locked.status not in DISPATCHABLE_VACANCY_STATUSES:
            raise _refuse("SLOT_GONE")  # filled (its booked offer still counts as active) or closed
        if early is not None and early.outcome == "ALREADY_OFFERED":
            if early.offer is None or early.offer.status != OfferStatus.OFFERED:
                raise _refuse("SLOT_GONE")  # someone said yes to it: the time is theirs
            return _keep(locked, old, locks.entry, policy, actor=actor, actor_label=label,
                         correlation_id=correlation_id, now=now)
        if early is not None:
            raise _refuse("SLOT_GONE")
        new = _renew(locked, old, locks.entry, policy, now=now, actor_label=label, correlation_id=correlation_id)
        receipt = offer_claim(clinic=clinic, offer_ref=new.ref, expected_version=new.version, patient=patient,
                              actor=actor, correlation_id=correlation_id, now=now, request_booking=request_booking,
                              idempotency_key=idempotency_key)
        _answered(locks.entry)
        audit_record(actor=actor, action="waitlist.offer_late_accept", clinic=clinic, target_ref=new.ref,
                     reason="LATE_ACCEPTED", correlation_id=correlation_id, system_label="late_accept",
                     result={"renews": old.ref, "vacancy": locks.vacancy.ref, "hold": receipt.hold_ref})
        new.refresh_from_db()
        return LateAccept(new, receipt)


def _keep(locked: Vacancy, old: Offer, entry, policy: WaitlistPolicy, *, actor, actor_label: str,
          correlation_id: str, now: datetime) -> LateAccept:
    """Under the fence, another offer of the time being out: keep this yes on the vacancy (the first one only;
    a marker, not a state: no version bump), with a ``LATE_YES_KEPT`` event and audit row."""
    if locked.late_yes_offer_id == old.pk:
        return LateAccept(old, None, kept=True)
    if locked.late_yes_offer_id is not None:
        raise _refuse("SLOT_OFFERED")  # someone else's late yes is ahead
    if entry.status != EntryStatus.WAITING:
        raise _refuse("ENTRY_NOT_WAITING")
    if matcher.ineligibility(entry=entry, vacancy=locked, policy=policy, now=now,
                             waived=eligibility.LATE_ACCEPT_WAIVED) is not None:
        raise _refuse("NOT_ELIGIBLE")
    Vacancy.objects.filter(pk=locked.pk).update(late_yes_offer=old)
    _answered(entry)
    event_append(offer=old, from_status=old.status, to_status=old.status, reason_code="LATE_YES_KEPT",
                 actor=actor_label, correlation_id=correlation_id, now=now, detail={"vacancy": locked.ref})
    audit_record(actor=actor, action="waitlist.offer_late_accept", clinic=locked.clinic, target_ref=old.ref,
                 reason="LATE_YES_KEPT", correlation_id=correlation_id, system_label="late_accept",
                 result={"vacancy": locked.ref})
    return LateAccept(old, None, kept=True)


def _answered(entry: WaitlistEntry) -> None:
    """Under the entry's lock: a late yes is an answer, so a patient asked last is back in their place (a marker,
    like ``asked_last_since`` itself: no version bump; the claim may have moved the row's version already)."""
    if entry.asked_last_since is not None:
        WaitlistEntry.objects.filter(pk=entry.pk).update(asked_last_since=None)


def _renew(locked: Vacancy, old: Offer, entry, policy: WaitlistPolicy, *, now: datetime, actor_label: str,
           correlation_id: str) -> Offer:
    """Under the chain's locks and the vacancy's fence: promotion of this one entry with the late accept's
    ``Attempt`` (no notice, no reachability); every refusal raised before anything is written."""
    if entry.status != EntryStatus.WAITING:
        raise _refuse("ENTRY_NOT_WAITING")
    candidate = matcher.Candidate(
        entry_id=entry.pk, entry_ref=entry.ref, patient_id=entry.patient_id, version=entry.version,
        slot_fit=int(entry.practitioner_id is not None and entry.practitioner_id == locked.practitioner_id),
        priority_rank=entry.priority_rank, waiting_since=entry.waiting_since, decision=None,
    )
    decision: Decision | None = NOT_USED_DECISION
    if policy.decision_gate == DecisionGate.REQUIRED:
        decision = get_decision_provider().decisions_for(clinic=locked.clinic, patient_ids=[entry.patient_id]).get(
            entry.patient_id)
    attempt = Attempt(policy, now, actor_label, correlation_id, False, renews=old)
    locked_entry, _used, facts = lock_first_free(locked, [(candidate, decision)], attempt, wait=True)
    if locked_entry is None or facts is None:
        raise _refuse("ENTRY_NOT_WAITING")
    result = promote_locked(locked, locked_entry, candidate, decision, facts, attempt)
    if result is None:
        raise _refuse("NOT_ELIGIBLE")
    if result.outcome == RESTART:
        raise _refuse("DECISION_STALE")
    if result.offer is None:
        raise _refuse("SLOT_GONE")
    return result.offer
