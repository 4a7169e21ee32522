"""Offer commands: claim, decline, expire, withdraw. Each locks vacancy → offer → hold → entry."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from common.errors import Conflict, DomainError, NotFound, SlotOccupied, VersionConflict
from common.fastpath import PreparedQuery
from common.models import OutboxMessage, OutboxStatus
from common.refs import new_ref
from common.services import actor_label, new_correlation_id
from common.timefmt import iso_in_zone
from common.transactions import own_transaction
from scheduling.models import CapacityAllocation, Clinic, HoldStatus, Patient
from scheduling.scoping import require_command_role
from scheduling.services.holds import hold_accept_locked, hold_extend
from waitlist import queries
from waitlist.dispatch.locks import OfferLocks, lock_offer_chain, lock_prepared_chain, offer_chain_queryset
from waitlist.dispatch.promotion import close_offer
from waitlist.effects import command_audit, event_logged
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    OFFER_TOPIC,
    DecisionStatus,
    EntryStatus,
    Offer,
    OfferClaimReceipt,
    OfferStatus,
    SuppressionScope,
    offer_withdrawable,
)
from waitlist.policy.services import policy_current
from waitlist.reliability.feed import Decision, decision_from_json, get_decision_provider
from waitlist.rules.terms import answer_deadline, window_rule
from waitlist.rules.windows import unanswered_streak

logger = logging.getLogger("waitlist")


def _is_expired(offer: Offer, now: datetime) -> bool:
    """Expiry is inclusive: at ``expires_at`` the offer is already expired."""
    return offer.status == OfferStatus.EXPIRED or (
        offer.status == OfferStatus.OFFERED and now >= offer.expires_at
    )


def _owner_check(locks: OfferLocks, patient: Patient | None) -> None:
    # A claim on the patient's behalf names the patient; someone else's offer looks missing.
    if patient is not None and locks.offer.patient_id != patient.pk:
        raise NotFound()


def _latest_decision() -> Subquery:
    """The patient's newest recorded decision as ``{ref, status, rank, expires_at}`` (or NULL), read in
    the claim's lock statement (a decision recorded while the claim waits for its locks is concurrent
    with the claim either way)."""
    return get_decision_provider().newest_expression(clinic=OuterRef("clinic_id"), patient=OuterRef("patient_id"))


def _decision_status(offer: Offer, now: datetime, latest: dict | None) -> str:
    """The offer's decision, unless a newer one was recorded since (``latest``: then that one counts).

    A staff review vouches for the decision it reviewed, not for a newer one; an offer made while the
    clinic's decision gate was NOT_USED needs none.
    """
    if offer.decision_status == DecisionStatus.NOT_USED:
        return DecisionStatus.FRESH
    newer = decision_from_json(latest)
    if newer is not None and newer.decision_ref != offer.decision_ref:
        return newer.effective_status(now)
    if offer.staff_reviewed:
        return DecisionStatus.FRESH
    return Decision(offer.decision_ref, offer.decision_status, 0, offer.decision_expires_at).effective_status(
        now
    )


def claim_write(
    locks: OfferLocks, *, receipt: OfferClaimReceipt, booking_requested_at, actor: str, correlation_id: str,
    now: datetime,
) -> None:
    """The claim's writes: the hold ACTIVE → ACCEPTED (scheduling's step, only while it still has its active
    allocation), then in one statement offer and entry OFFERED → ACCEPTED, the CLAIMED event and the claim receipt
    (``queries.offer_claim_write``).

    Each step runs only if the one before it changed its row (the compare-and-set of ``cas_update``,
    chained), so a miss writes nothing of the later steps; under the locks it cannot miss, and if it
    ever did the error rolls the whole transaction back (no receipt is stored, the key can be retried).
    Public only as the step ``bench/hold_step_ab.py`` swaps for the statement it replaced.
    """
    offer, hold, entry = locks.offer, locks.hold, locks.entry
    correlation = correlation_id or offer.correlation_id
    receipt_id = None
    if hold_accept_locked(hold, expires_at=receipt.hold_expires_at):
        receipt_id = queries.offer_claim_write(
            offer=offer, entry=entry, receipt=receipt, booking_requested_at=booking_requested_at, actor=actor,
            correlation_id=correlation, detail={"hold": hold.ref}, now=now)
    if receipt_id is None:
        transaction.set_rollback(True)  # even if a caller catches this, nothing of the claim is kept
        raise RuntimeError(f"claim of {offer.ref} missed a locked row; nothing is kept")
    receipt.pk, receipt._state.adding = receipt_id, False
    offer.status, offer.version = OfferStatus.ACCEPTED, offer.version + 1
    offer.booking_requested_at = booking_requested_at
    entry.status, entry.version = EntryStatus.ACCEPTED, entry.version + 1
    event_logged(
        offer=offer, from_status=OfferStatus.OFFERED, to_status=OfferStatus.ACCEPTED, reason_code="CLAIMED",
        actor=actor, correlation_id=correlation,
    )


#: The claim's lock statement (``lock_offer_chain`` with the policy, the newest decision and whether the
#: hold still has its allocation), compiled once per process and decision provider (issue 15: compiling
#: it was ~5 ms of Python per claim, more than PostgreSQL spends running it).
_CLAIM_CHAIN: PreparedQuery[Offer] = PreparedQuery(
    lambda clinic_id, ref: offer_chain_queryset(
        clinic_id=clinic_id,
        lookup={"ref": ref},
        related=("policy",),
        vacancy_related=(),
        latest_decision=_latest_decision(),
        has_allocation=Exists(CapacityAllocation.objects.filter(hold_id=OuterRef("hold_id"), active=True)),
    ),
    int,
    str,
)


def offer_claim(
    *,
    clinic: Clinic,
    offer_ref: str,
    expected_version: int,
    actor=None,
    patient: Patient | None = None,
    idempotency_key: str | None = None,
    now: datetime | None = None,
    correlation_id: str = "",
    request_booking: bool = False,
) -> OfferClaimReceipt:
    """OFFERED → ACCEPTED with the hold ACTIVE → ACCEPTED; returns the stored claim receipt.

    ACCEPTED is not CONFIRMED: the receipt names the hold and its expiry for the booking command.
    A repeat of a successful claim (expected_version + 1 == version, no Idempotency-Key or the
    same one) returns the same receipt. Refusals: OFFER_EXPIRED, OFFER_NOT_CLAIMABLE,
    VERSION_CONFLICT, DECISION_STALE, SLOT_OCCUPIED; a foreign or unknown ref is NOT_FOUND.
    ``request_booking`` (the claim page under ``confirmation=ON_ACCEPT``) records that this accept is
    also the booking command, so reconcile may finish it if the booking step did not run.
    The receipt carries ``appointment_ref``: the appointment the hold was booked into, if any.
    A claim that goes through is three statements (issue 15, issue 42): the lock chain with everything the
    checks read, scheduling's hold step, then the waitlist's writes; inside a caller's transaction it adds no
    savepoint of its own.
    """
    now = now or timezone.now()
    with own_transaction():
        locks = lock_prepared_chain(_CLAIM_CHAIN, clinic=clinic, offer_ref=offer_ref, key=get_decision_provider())
        _owner_check(locks, patient)
        repeat = _claim_repeated(locks, expected_version=expected_version, idempotency_key=idempotency_key)
        if repeat is not None:
            return repeat
        _claim_refusal(locks, expected_version=expected_version, now=now)
        receipt = _claim_receipt(locks, clinic=clinic, idempotency_key=idempotency_key, now=now)
        claim_write(
            locks,
            receipt=receipt,
            booking_requested_at=now if request_booking else None,
            actor=actor_label(actor, "claim"),
            correlation_id=correlation_id,
            now=now,
        )
        receipt.appointment_ref = None  # a hold is booked after its claim, never during it
        return receipt


def _claim_repeated(locks: OfferLocks, *, expected_version: int, idempotency_key: str | None
                    ) -> OfferClaimReceipt | None:
    """The stored receipt when this claim repeats one that went through (``expected_version + 1 == version``,
    no Idempotency-Key or the same one), else None."""
    offer, hold = locks.offer, locks.hold
    if offer.status != OfferStatus.ACCEPTED or expected_version + 1 != offer.version:
        return None
    receipt = OfferClaimReceipt.objects.filter(offer=offer).first()
    if receipt is None or (idempotency_key is not None and idempotency_key != receipt.idempotency_key):
        return None
    # Read only on this rare path (a service-level repeat), not joined into the lock statement.
    receipt.appointment_ref = hold.appointment.ref if hold.appointment is not None else None
    return receipt


def _claim_refusal(locks: OfferLocks, *, expected_version: int, now: datetime) -> None:
    """Raise the claim's refusal, first that applies: OFFER_EXPIRED, OFFER_NOT_CLAIMABLE, VERSION_CONFLICT,
    OFFER_NOT_CLAIMABLE (the entry or hold moved on), DECISION_STALE, SLOT_OCCUPIED."""
    offer, hold, entry, vacancy = locks.offer, locks.hold, locks.entry, locks.vacancy
    if _is_expired(offer, now) or (offer.status == OfferStatus.OFFERED and vacancy.starts_at <= now):
        raise Conflict("The offer has expired.", code="OFFER_EXPIRED")
    if offer.status != OfferStatus.OFFERED:
        raise Conflict(f"The offer is {offer.status}.", code="OFFER_NOT_CLAIMABLE")
    if offer.version != expected_version:
        raise VersionConflict("The offer was changed; reload it.")
    if (
        entry.status != EntryStatus.OFFERED
        or entry.patient_id != offer.patient_id
        or hold.patient_id != offer.patient_id
    ):
        raise Conflict("The offer no longer belongs to this entry.", code="OFFER_NOT_CLAIMABLE")
    if _decision_status(offer, now, offer.latest_decision) != DecisionStatus.FRESH:
        raise Conflict("The booking decision behind this offer is stale.", code="DECISION_STALE")
    if hold.status != HoldStatus.ACTIVE or not offer.has_allocation:
        raise SlotOccupied("The slot is no longer reserved for this offer.")


def _claim_receipt(locks: OfferLocks, *, clinic: Clinic, idempotency_key: str | None, now: datetime
                   ) -> OfferClaimReceipt:
    """The receipt the claim stores (not yet written): the hold and its new expiry, the body the API returns."""
    offer, hold = locks.offer, locks.hold
    hold_expires_at = min(now + timedelta(minutes=offer.policy.hold_minutes), locks.vacancy.starts_at)
    receipt_ref = new_ref("clr")
    return OfferClaimReceipt(
        ref=receipt_ref,
        clinic=clinic,
        offer=offer,
        offer_version=offer.version + 1,
        hold_ref=hold.ref,
        hold_expires_at=hold_expires_at,
        idempotency_key=idempotency_key or "",
        body={
            "status": OfferStatus.ACCEPTED.value,
            "offer": offer.ref,
            "version": offer.version + 1,
            "hold": hold.ref,
            "hold_expires_at": iso_in_zone(hold_expires_at, clinic.timezone),
            "receipt": receipt_ref,
        },
        created_at=timezone.now(),
    )


def offer_decline(
    *,
    clinic: Clinic,
    offer_ref: str,
    actor=None,
    reason: str = "",
    expected_version: int | None = None,
    patient: Patient | None = None,
    now: datetime | None = None,
    correlation_id: str = "",
    idempotency_key: str = "",
) -> Offer:
    """OFFERED → DECLINED: release the hold, suppress the entry for the policy's hours, cascade.

    ``reason`` (a code or a short note, at most 200 characters) is stored on the offer
    (``decline_reason``) and in the event. Declining a DECLINED offer again is a no-op.
    The patient (``patient``, from their claim page) may decline their own offer; a signed-in ``actor``
    declines on the patient's behalf, which is an ADMIN command (``COMMAND_ROLES``), audited.
    """
    now = now or timezone.now()
    on_behalf = patient is None and getattr(actor, "is_authenticated", False)
    if on_behalf:
        require_command_role(actor, clinic, "offer_decline")
    correlation_id = correlation_id or new_correlation_id()
    with transaction.atomic():
        locks = lock_offer_chain(clinic=clinic, offer_ref=offer_ref)
        _owner_check(locks, patient)
        offer = locks.offer
        if offer.status == OfferStatus.DECLINED:
            return offer
        if _is_expired(offer, now):
            raise Conflict("The offer has expired.", code="OFFER_EXPIRED")
        if offer.status != OfferStatus.OFFERED:
            raise Conflict(f"The offer is {offer.status}.", code="OFFER_NOT_DECLINABLE")
        if expected_version is not None and offer.version != expected_version:
            raise VersionConflict("The offer was changed; reload it.")
        policy = policy_current(clinic=clinic)
        offer = close_offer(
            locks,
            to_status=OfferStatus.DECLINED,
            reason_code="DECLINED",
            actor=actor_label(actor, "decline"),
            correlation_id=correlation_id,
            now=now,
            suppressed_until=now + timedelta(hours=policy.decline_suppression_hours),
            similar_only=policy.decline_suppression_scope == SuppressionScope.SIMILAR,
            detail={"decline_reason": (reason or "")[:200]},
            decline_reason=(reason or "")[:200],
        )
        if on_behalf:
            command_audit(offer, action="offer_decline", actor=actor, clinic=clinic, reason=reason or "DECLINED",
                          correlation_id=correlation_id, idempotency_key=idempotency_key, system_label="decline")
        return offer


# The send window held the notice back (``common.notify`` deferral codes); a provider failure is not one.
DEFERRAL_CODES = ("QUIET_HOURS", "CONTACT_CAP")


def notice_deferred():
    """Offers whose notice the send window holds back right now (PENDING after a deferral)."""
    return Exists(
        OutboxMessage.objects.filter(
            topic=OFFER_TOPIC,
            aggregate_ref=OuterRef("ref"),
            status=OutboxStatus.PENDING,
            last_error_code__in=DEFERRAL_CODES,
        )
    )


def expiry_due(offer: Offer, hold, vacancy, now: datetime) -> str | None:
    """The reason an active offer ends now, or None.

    OFFERED: its answer window is over (``expires_at``), unless the send window still holds its notice
    back (the answer window counts from delivery, which then extends it) — never past the slot's start.
    A notice that failed or died lets the window stand, so a provider outage still cascades.
    ACCEPTED and unbooked: its hold reached its expiry (``HOLD_EXPIRED``).
    """
    if offer.status == OfferStatus.OFFERED and now >= offer.expires_at:
        if offer.notified_at is None and vacancy.starts_at > now:
            if Offer.objects.filter(pk=offer.pk).filter(notice_deferred()).exists():
                return None
        return "EXPIRED"
    if offer.status == OfferStatus.ACCEPTED and hold.status == HoldStatus.ACCEPTED and now >= hold.expires_at:
        return "HOLD_EXPIRED"
    return None


def offer_expire(
    *, clinic: Clinic, offer_ref: str, now: datetime | None = None, correlation_id: str = ""
) -> Offer:
    """End an active offer that is due (``expiry_due``): → EXPIRED, hold released in the same
    transaction, entry back to WAITING, cascade. OFFERED → EXPIRED (``EXPIRED``) or ACCEPTED → EXPIRED
    (``HOLD_EXPIRED``: accepted but not booked in time). An offer already closed is a no-op; one not
    due is 409 ``OFFER_NOT_DUE``."""
    now = now or timezone.now()
    with transaction.atomic():
        locks = lock_offer_chain(clinic=clinic, offer_ref=offer_ref)
        offer = locks.offer
        if offer.status not in ACTIVE_OFFER_STATUSES or locks.hold.status == HoldStatus.CONSUMED:
            return offer
        reason = expiry_due(offer, locks.hold, locks.vacancy, now)
        if reason is None:
            raise Conflict("The offer has not expired yet.", code="OFFER_NOT_DUE")
        return close_offer(
            locks,
            to_status=OfferStatus.EXPIRED,
            reason_code=reason,
            actor="system:expire",
            correlation_id=correlation_id,
            now=now,
        )


def offers_expire_due(*, now: datetime | None = None, limit: int = 100) -> int:
    """Expire up to ``limit`` due offers (OFFERED past their window, ACCEPTED holds past their expiry),
    oldest first, each in its own transaction. Returns how many."""
    now = now or timezone.now()
    offered = Q(status=OfferStatus.OFFERED, expires_at__lte=now) & (
        Q(notified_at__isnull=False) | Q(vacancy__starts_at__lte=now) | ~notice_deferred()
    )
    held = Q(status=OfferStatus.ACCEPTED, hold__status=HoldStatus.ACCEPTED, hold__expires_at__lte=now)
    due = list(
        Offer.objects.filter(offered | held).select_related("clinic").order_by("expires_at", "id")[:limit]
    )
    expired = 0
    for offer in due:
        try:
            if offer_expire(clinic=offer.clinic, offer_ref=offer.ref, now=now).status == OfferStatus.EXPIRED:
                expired += 1
        except DomainError as exc:  # another worker got there first, or it changed: skip it
            logger.info("offer %s not expired: %s", offer.ref, exc.code)
    return expired


def deadline_if_delivered(offer: Offer, *, starts_at: datetime, tz_name: str, delivered_at: datetime) -> datetime:
    """The offer's answer deadline once its notice is delivered at ``delivered_at``: the window counted from then,
    never earlier than the deadline it has. The notice states it, and ``offer_notice_delivered`` records it."""
    rule = window_rule(offer.policy, tz_name, unanswered=unanswered_streak(offer.policy, offer.entry_id,
                                                                          before_offer_id=offer.pk))
    return max(offer.expires_at, answer_deadline(rule, start=delivered_at,
                                                 slot_starts_at=starts_at))


def offer_notice_delivered(
    *, clinic: Clinic, offer_ref: str, delivered_at: datetime, correlation_id: str = "",
    deadline: datetime | None = None, offer: Offer | None = None,
) -> Offer:
    """The offer's notice went out at ``delivered_at``: its answer window counts from then.

    ``expires_at`` (and the hold's) becomes the policy's answer deadline counted from ``delivered_at``
    (``terms.answer_deadline``) when that is later; event ``NOTICE_DELIVERED`` (detail: late_seconds,
    expires_at, extended). Only the first delivery counts; an offer no longer OFFERED is left alone. Two
    statements in one transaction: the offer and its event (``queries.offer_notice_delivered_write``, which locks
    the offer first), then, only when the window grows, scheduling's ``hold_extend``. ``deadline``: the one the
    notice stated (``deadline_if_delivered`` at ``delivered_at``), so the record is what the patient read and
    the policy and streak are not read twice; ``offer``: the delivery's own (unlocked) read of it, for its id
    and hold; both read here when not given.
    Returns ``offer`` as written (unchanged when nothing was). A hold no longer ACTIVE when the window must
    grow: Conflict, nothing written.
    """
    if offer is None:
        offer = Offer.objects.select_related("vacancy", "policy").filter(clinic=clinic, ref=offer_ref).first()
        if offer is None:
            raise NotFound()
    if deadline is None:
        deadline = deadline_if_delivered(offer, starts_at=offer.vacancy.starts_at, tz_name=clinic.timezone,
                                         delivered_at=delivered_at)
    now = timezone.now()
    with transaction.atomic():
        written = queries.offer_notice_delivered_write(
            offer_id=offer.pk, clinic_id=clinic.pk, delivered_at=delivered_at, deadline=deadline, now=now,
            correlation_id=correlation_id)
        if written is None:
            return offer
        # The hold grows with the window (scheduling's step, after the offer's lock: the lock order).
        if written.was < deadline and not hold_extend(offer.hold_id, expires_at=deadline, now=now):
            raise Conflict("The offer's hold is no longer active.", code="STATE_CONFLICT")
    expires_at, version, offer_correlation = written.expires_at, written.version, written.correlation_id
    offer.notified_at, offer.expires_at, offer.version = delivered_at, expires_at, version
    event_logged(offer=offer, from_status=OfferStatus.OFFERED, to_status=OfferStatus.OFFERED,
                 reason_code="NOTICE_DELIVERED", actor="system:notify",
                 correlation_id=correlation_id or offer_correlation)
    return offer


def offer_withdraw(*, clinic: Clinic, offer_ref: str, actor, reason: str, expected_version: int | None = None,
                   now: datetime | None = None, correlation_id: str = "", idempotency_key: str = "") -> Offer:
    """Staff take back an OFFERED or ACCEPTED (not yet booked) offer: hold released, entry waits again."""
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    with transaction.atomic():
        locks = lock_offer_chain(clinic=clinic, offer_ref=offer_ref)
        offer = locks.offer
        if offer.status == OfferStatus.WITHDRAWN:
            return offer
        if not offer_withdrawable(offer.status, locks.hold.status):
            raise Conflict(
                f"The offer is {offer.status} and cannot be withdrawn.", code="OFFER_NOT_WITHDRAWABLE"
            )
        if expected_version is not None and offer.version != expected_version:
            raise VersionConflict("The offer was changed; reload it.")
        offer = close_offer(locks, to_status=OfferStatus.WITHDRAWN, reason_code="STAFF_WITHDRAWN",
                            actor=actor_label(actor, "withdraw"), correlation_id=correlation_id, now=now)
        command_audit(offer, action="offer_withdraw", actor=actor, clinic=clinic, reason=reason,
                      correlation_id=correlation_id, idempotency_key=idempotency_key, system_label="withdraw")
        return offer
