"""What the claim page tells a patient about their offer: still open, held, booked, or how and when it ended."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import TextChoices
from django.utils import timezone

from common.fastpath import PreparedQuery
from scheduling.models import Appointment, AppointmentStatus
from scheduling.services.features import feature_enabled
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    OPEN_ENTRY_STATUSES,
    EntryStatus,
    Offer,
    OfferEvent,
    OfferStatus,
    WaitlistPolicy,
)
from waitlist.rules.terms import late_acceptable


class ClaimState(TextChoices):
    OPEN = "OPEN"  # OFFERED and answerable
    HELD = "HELD"  # ACCEPTED, not (yet) booked
    BOOKED = "BOOKED"  # a CONFIRMED appointment came from it
    BOOKING_CANCELLED = "BOOKING_CANCELLED"  # booked, and the appointment was cancelled since
    DECLINED = "DECLINED"
    EXPIRED = "EXPIRED"  # no answer in time (or the accepted hold ran out unbooked)
    WITHDRAWN = "WITHDRAWN"  # the clinic took it back
    RELEASED = "RELEASED"  # booked automatically (standing acceptance), then released by the patient


@dataclass(frozen=True)
class ClaimOutcome:
    state: str
    ended_at: datetime | None = None  # when it was declined, ended or withdrawn
    appointment: Appointment | None = None  # BOOKED / BOOKING_CANCELLED
    on_list: bool = False  # the entry is still waiting (an ended offer)
    release_until: datetime | None = None  # BOOKED automatically (standing acceptance) and releasable until then
    late_yes: str = ""  # EXPIRED unanswered: what a yes may still do (``LateYes``)

    @property
    def is_open(self) -> bool:
        return self.state == ClaimState.OPEN


def _event_at(offer: Offer) -> datetime | None:
    return (OfferEvent.objects.filter(offer=offer, to_status=offer.status).order_by("-id")
            .values_list("created_at", flat=True).first())


def _page_offers():
    return Offer.objects.select_related("clinic", "patient", "policy", "entry", "hold", "vacancy__treatment",
                                        "vacancy__practitioner").order_by("pk")


#: The claim page's offer, by (offer ref, entry ref), and the offer renewing one (by its id): compiled once per
#: process and planned once per connection (an eight-table read, read again after every answer).
_PAGE_OFFER: PreparedQuery[Offer] = PreparedQuery(
    lambda ref, entry_ref: _page_offers().filter(ref=ref, entry__ref=entry_ref)[:1], str, str)
_RENEWAL: PreparedQuery[Offer] = PreparedQuery(lambda offer_id: _page_offers().filter(renews_id=offer_id)[:1], int)
_BOOKED_FROM: PreparedQuery[Appointment] = PreparedQuery(
    lambda offer_id: Appointment.objects.select_related("clinic", "practitioner", "treatment")
    .filter(source_hold__offer__id=offer_id).order_by("pk")[:1], int)


def claim_offer(offer_ref: str, entry_ref: str) -> Offer | None:
    """The offer a claim link names (its ref and its entry's), with everything the page shows."""
    return _PAGE_OFFER.first(offer_ref, entry_ref)


def renewal_of(offer: Offer) -> Offer:
    """The offer the patient's link now stands for: ``offer``, or the late accept that took it up again
    (``Offer.renews``), read as the claim page reads an offer. Only an EXPIRED offer is ever renewed (a late
    accept expires an OFFERED one first), so any other is its own answer without a read."""
    if offer.status != OfferStatus.EXPIRED:
        return offer
    renewal = _RENEWAL.first(offer.pk)
    return offer if renewal is None else renewal


class LateYes(TextChoices):
    """What an offer that ended unanswered still allows (``terms.late_acceptable``, ``offer_late_accept``)."""

    NONE = ""
    FREE = "FREE"  # the time is free: a yes books it now
    NEXT = "NEXT"  # someone else is being asked: a yes is kept, and the time is theirs if it comes back
    KEPT = "KEPT"  # this patient's yes is kept on the vacancy


def late_yes(offer: Offer, now: datetime) -> str:
    """Whether the patient may still take the time of ``offer``, which ended unanswered: the clinic takes late
    answers, the slot is far enough away, the vacancy is open and the entry waits (or waits for the expiry job
    to end this very offer); FREE with no other offer out, NEXT while another is out and no one else's late yes
    is kept, KEPT when theirs is. The command re-checks all of it under its locks."""
    vacancy = offer.vacancy
    policy = WaitlistPolicy.objects.filter(clinic_id=offer.clinic_id).order_by("-version").first()
    if policy is None or late_acceptable(offer, vacancy, policy, now) is not None:
        return LateYes.NONE
    waiting = offer.entry.status == EntryStatus.WAITING or (
        offer.status == OfferStatus.OFFERED and offer.entry.status == EntryStatus.OFFERED)
    if vacancy.status not in DISPATCHABLE_VACANCY_STATUSES or not waiting:
        return LateYes.NONE
    if not feature_enabled("waitlist", offer.clinic):
        return LateYes.NONE
    if vacancy.late_yes_offer_id == offer.pk:
        return LateYes.KEPT
    other = (Offer.objects.filter(vacancy_id=vacancy.pk, status__in=ACTIVE_OFFER_STATUSES).exclude(pk=offer.pk)
             .values_list("status", flat=True).first())
    if other is None:
        return LateYes.FREE
    return LateYes.NEXT if other == OfferStatus.OFFERED and vacancy.late_yes_offer_id is None else LateYes.NONE


class AnswerStep(TextChoices):
    """What a patient's answer does to their offer (``answer_step``)."""

    CLAIM = "CLAIM"  # claim it (and book under ON_ACCEPT); a repeated yes replays the first answer
    LATE_ACCEPT = "LATE_ACCEPT"  # it ended unanswered and a yes may still take the time up
    DECLINE = "DECLINE"
    ALREADY_DECLINED = "ALREADY_DECLINED"  # a repeated no: the first one stands
    ENDED = "ENDED"  # nothing to do: say how the offer ended


def answer_step(outcome: ClaimOutcome, *, yes: bool) -> str:
    """The one rule for a patient's yes or no, whether it comes from the claim page or a text reply: a yes claims
    an offer still open, held or booked (the command replays a repeat), takes up late one that ended unanswered
    while its time is free or someone else is asked (``LateYes.FREE``/``NEXT``), and does nothing otherwise; a no
    declines an open offer, repeats a decline, and does nothing otherwise."""
    if yes:
        if outcome.state == ClaimState.EXPIRED and outcome.late_yes in (LateYes.FREE, LateYes.NEXT):
            return AnswerStep.LATE_ACCEPT
        if outcome.state in (ClaimState.OPEN, ClaimState.HELD, ClaimState.BOOKED):
            return AnswerStep.CLAIM
        return AnswerStep.ENDED
    if outcome.state == ClaimState.DECLINED:
        return AnswerStep.ALREADY_DECLINED
    return AnswerStep.DECLINE if outcome.is_open else AnswerStep.ENDED


def claim_outcome(offer: Offer, now: datetime | None = None) -> ClaimOutcome:
    """The offer's state as the patient sees it. ``offer`` carries its vacancy (the page's row).

    An OFFERED offer past its answer window (or its slot's start), or an unbooked ACCEPTED one past its
    hold's expiry, has ended even before the expiry job has run: it ended at that deadline. An expiry
    is dated by its deadline (the hold's for an accepted hold that ran out); a decline and a withdrawal
    by their event.
    """
    now = now or timezone.now()
    if offer.status == OfferStatus.OFFERED:
        deadline = min(offer.expires_at, offer.vacancy.starts_at)
        if now < deadline:
            return ClaimOutcome(ClaimState.OPEN)
        return ClaimOutcome(ClaimState.EXPIRED, ended_at=deadline, on_list=offer.entry.status in OPEN_ENTRY_STATUSES,
                            late_yes=late_yes(offer, now))
    if offer.status == OfferStatus.ACCEPTED:
        appointment = _BOOKED_FROM.first(offer.pk)
        if appointment is None:
            if now >= offer.hold.expires_at:  # ran out unbooked; the expiry job makes it HOLD_EXPIRED
                return ClaimOutcome(ClaimState.EXPIRED, ended_at=offer.hold.expires_at,
                                    on_list=offer.entry.status in OPEN_ENTRY_STATUSES)
            return ClaimOutcome(ClaimState.HELD)
        if appointment.status == AppointmentStatus.CONFIRMED:
            releasable = offer.standing and offer.release_until is not None and now < offer.release_until
            return ClaimOutcome(ClaimState.BOOKED, appointment=appointment,
                                release_until=offer.release_until if releasable else None)
        return ClaimOutcome(ClaimState.BOOKING_CANCELLED, ended_at=appointment.updated_at, appointment=appointment)
    on_list = offer.entry.status in OPEN_ENTRY_STATUSES
    if offer.status == OfferStatus.EXPIRED:
        if offer.reason_code == "HOLD_EXPIRED":
            ended_at = offer.hold.expires_at
        else:
            ended_at = min(offer.expires_at, offer.vacancy.starts_at)
        return ClaimOutcome(ClaimState.EXPIRED, ended_at=ended_at, on_list=on_list,
                            late_yes=late_yes(offer, now) if offer.reason_code == "EXPIRED" else "")
    if offer.status == OfferStatus.DECLINED:
        state = ClaimState.DECLINED
    elif offer.reason_code == "STANDING_RELEASED":
        state = ClaimState.RELEASED
    else:
        state = ClaimState.WITHDRAWN
    return ClaimOutcome(state, ended_at=_event_at(offer) or offer.updated_at, on_list=on_list)
