"""Standing acceptance: a patient's advance yes ("book me automatically"), the booking dispatch makes on it,
and the patient's release of that booking.

A patient who answers fills slots; one who is asleep, at work or slow does not, however long the answer window.
With a standing acceptance recorded on their entry, dispatch makes the offer and books it in the same
command (``standing_book``, under the vacancy fence, in promotion's transaction), and the booking notice
carries a release link: ``standing_release`` ends the booking, reopens the slot as a new vacancy (the
releasing patient excluded) and the cascade offers it, all audited. Whether a standing acceptance applies and until
when its booking may be released are rules of the offer's terms (``waitlist.rules.terms``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from common.cas import cas_update
from common.errors import Conflict, NotFound, ValidationFailed
from common.services import actor_label, audit_record, new_correlation_id
from scheduling import services as scheduling
from scheduling.models import CancelActor, CancelReason, Clinic, HoldStatus, Patient, cancel_actor_ref
from waitlist.dispatch.locks import OfferLocks, lock_offer_chain
from waitlist.effects import event_append, queue_dispatch
from waitlist.models import (
    OPEN_ENTRY_STATUSES,
    EntryStatus,
    Offer,
    OfferStatus,
    StandingAcceptance,
    StandingAcceptanceSource,
    StandingAcceptanceState,
    SuppressionScope,
    Vacancy,
    VacancyStatus,
    WaitlistEntry,
)
from waitlist.notices.confirmation_services import booking_confirmation_queue
from waitlist.policy.services import policy_current
from waitlist.texts.services.acknowledgement import acknowledgement_expect

#: The longest minimum notice a patient may ask for (a week: longer would rarely book anything).
MAX_MIN_NOTICE_MINUTES = 7 * 24 * 60

def standing_acceptance_record(
    *, clinic: Clinic, entry_ref: str, state: str, source: str, min_notice_minutes: int = 0, actor=None,
    reason: str = "", now: datetime | None = None, correlation_id: str = "",
) -> StandingAcceptance:
    """Grant or revoke the entry's standing acceptance: one appended row (the newest is current) and an audit row.

    ``source`` says who recorded it: CLAIM_PAGE and NOTICE_LINK are the patient's own pages; API and STAFF act on
    the patient's word, so STAFF needs ``reason`` (how the patient agreed). Refusals (nothing written):
    VALIDATION_ERROR (bad state, source or notice, no reason from staff), ENTRY_NOT_OPEN (a grant for an entry
    no longer on the list); a foreign or unknown entry is NOT_FOUND.
    """
    now = now or timezone.now()
    problems: dict[str, list[str]] = {}
    if state not in StandingAcceptanceState.values:
        problems["state"] = [f"One of {', '.join(StandingAcceptanceState.values)}."]
    if source not in StandingAcceptanceSource.values:
        problems["source"] = [f"One of {', '.join(StandingAcceptanceSource.values)}."]
    if not isinstance(min_notice_minutes, int) or isinstance(min_notice_minutes, bool) or not (
        0 <= min_notice_minutes <= MAX_MIN_NOTICE_MINUTES
    ):
        problems["min_notice_minutes"] = [f"A whole number of minutes from 0 to {MAX_MIN_NOTICE_MINUTES}."]
    if source == StandingAcceptanceSource.STAFF and not (reason or "").strip():
        problems["reason"] = ["Say how the patient agreed."]
    if problems:
        raise ValidationFailed("The standing acceptance is not valid.", fields=problems)
    with transaction.atomic():
        entry = (WaitlistEntry.objects.select_for_update(no_key=True)
                 .filter(clinic=clinic, ref=entry_ref if isinstance(entry_ref, str) else "").first())
        if entry is None:
            raise NotFound("No such waitlist entry.")
        if state == StandingAcceptanceState.GRANTED and entry.status not in OPEN_ENTRY_STATUSES:
            raise Conflict(f"The entry is {entry.status}.", code="ENTRY_NOT_OPEN")
        correlation_id = correlation_id or new_correlation_id()
        row = StandingAcceptance.objects.create(
            clinic=clinic, entry=entry, patient_id=entry.patient_id, state=state,
            min_notice_minutes=min_notice_minutes if state == StandingAcceptanceState.GRANTED else 0,
            source=source, actor=_who(actor, source), reason=(reason or "")[:200], correlation_id=correlation_id,
            recorded_at=now,
        )
        audit_record(actor=actor, action="waitlist.standing_acceptance", clinic=clinic, target_ref=entry.ref,
                     reason=(reason or source)[:200], correlation_id=correlation_id, system_label="standing",
                     result={"ref": row.ref, "state": state, "source": source,
                             "min_notice_minutes": row.min_notice_minutes})
        return row


def _who(actor, source: str) -> str:
    if source in (StandingAcceptanceSource.CLAIM_PAGE, StandingAcceptanceSource.NOTICE_LINK):
        return "patient"
    return actor_label(actor, "standing")


def standing_notice(entry_id: int) -> int | None:
    """The entry's current standing acceptance as its minimum notice (None: none GRANTED): what promotion's entry
    lock reads with the lock (``waitlist.queries``), read alone."""
    newest = (StandingAcceptance.objects.filter(entry_id=entry_id).order_by("-id")
              .values_list("state", "min_notice_minutes").first())
    return newest[1] if newest is not None and newest[0] == StandingAcceptanceState.GRANTED else None


def standing_book(vacancy: Vacancy, offer: Offer, entry: WaitlistEntry, *, actor: str, correlation_id: str,
                  now: datetime):
    """Under promotion's locks, right after the offer was written: accept and book it on the patient's standing
    word (offer ACCEPTED, hold ACCEPTED → CONSUMED into a CONFIRMED appointment, entry BOOKED, vacancy FILLED),
    with its events. Returns the appointment."""
    hold = offer.hold
    scheduling.hold_accept(hold=hold, expires_at=vacancy.starts_at)
    cas_update(offer, expected_status=OfferStatus.OFFERED, status=OfferStatus.ACCEPTED, reason_code="STANDING")
    cas_update(entry, expected_status=EntryStatus.OFFERED, status=EntryStatus.ACCEPTED)
    event_append(offer=offer, from_status=OfferStatus.OFFERED, to_status=OfferStatus.ACCEPTED,
                 reason_code="STANDING_ACCEPTED", actor=actor, correlation_id=correlation_id, now=now,
                 detail={"release_until": offer.release_until.isoformat() if offer.release_until else None})
    appointment, _created = scheduling.hold_book(clinic=vacancy.clinic, hold_ref=hold.ref)
    cas_update(entry, expected_status=EntryStatus.ACCEPTED, status=EntryStatus.BOOKED)
    cas_update(vacancy, expected_status=vacancy.status, status=VacancyStatus.FILLED)
    event_append(offer=offer, from_status=OfferStatus.ACCEPTED, to_status=OfferStatus.ACCEPTED, reason_code="BOOKED",
                 actor=actor, correlation_id=correlation_id, now=now,
                 detail={"appointment": appointment.ref, "hold": hold.ref, "standing": True})
    acknowledgement_expect(offer=offer, starts_at=vacancy.starts_at, now=now)  # counts once seen (issue 39)
    # The one notice of this booking: "you are booked", with the release link (built at send time).
    booking_confirmation_queue(offer=offer, appointment=appointment, correlation_id=correlation_id, now=now,
                               release_until=offer.release_until)
    return appointment


def _release_actor(patient: Patient | None, actor) -> str:
    """Who released the booking, as the appointment records it: the patient on their page, else the user."""
    if patient is not None:
        return cancel_actor_ref(CancelActor.PATIENT, patient)
    if getattr(actor, "is_authenticated", False):
        return cancel_actor_ref(CancelActor.STAFF, actor)
    return cancel_actor_ref(CancelActor.SYSTEM, "release")


def standing_release(
    *, clinic: Clinic, offer_ref: str, actor=None, patient: Patient | None = None, reason: str = "",
    now: datetime | None = None, correlation_id: str = "",
):
    """The patient releases a standing booking before its ``release_until``: the appointment is CANCELLED, the
    vacancy is OPEN again (FILLED → OPEN, the one way out of FILLED) and its dispatch queued (the cascade), the
    offer ends WITHDRAWN (reason STANDING_RELEASED, which bars the entry from this vacancy) and the entry waits
    again, held back from offers like this one for the policy's suppression hours. Returns ``(offer, vacancy)``.
    A repeat after success answers the same. The vacancy counts as filled again only if the cascade refills it.

    ``patient`` (the claim page): the offer must be theirs. Refusals: NOT_STANDING (not a standing booking),
    RELEASE_CLOSED (past ``release_until``, or the booking changed since); foreign or unknown: NOT_FOUND.
    """
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    with transaction.atomic():
        locks = lock_offer_chain(clinic=clinic, offer_ref=offer_ref)
        offer, hold, entry, vacancy = locks.offer, locks.hold, locks.entry, locks.vacancy
        if patient is not None and offer.patient_id != patient.pk:
            raise NotFound("No such offer.")
        if not offer.standing:
            raise Conflict("The offer was not booked under a standing acceptance.", code="NOT_STANDING")
        if offer.status == OfferStatus.WITHDRAWN and offer.reason_code == "STANDING_RELEASED":
            return offer, vacancy
        if (offer.status != OfferStatus.ACCEPTED or hold.status != HoldStatus.CONSUMED or hold.appointment is None
                or entry.status != EntryStatus.BOOKED or offer.release_until is None or now >= offer.release_until):
            raise Conflict("This booking can no longer be released here; call the clinic.", code="RELEASE_CLOSED")
        appointment = scheduling.appointment_cancel(
            clinic=clinic, appointment_ref=hold.appointment.ref, reason="STANDING_RELEASED",
            reason_code=CancelReason.STANDING_RELEASED, cancelled_by=_release_actor(patient, actor))
        cas_update(offer, expected_status=OfferStatus.ACCEPTED, status=OfferStatus.WITHDRAWN,
                   reason_code="STANDING_RELEASED")
        _entry_waits_again(locks, now=now)
        cas_update(vacancy, expected_status=VacancyStatus.FILLED, status=VacancyStatus.OPEN, exhausted_at=None,
                   late_yes_offer=None)
        queue_dispatch(vacancy.pk)
        label = "patient" if patient is not None else actor_label(actor, "release")
        detail = {"appointment": appointment.ref, "vacancy": vacancy.ref}
        event_append(offer=offer, from_status=OfferStatus.ACCEPTED, to_status=OfferStatus.WITHDRAWN,
                     reason_code="STANDING_RELEASED", actor=label, correlation_id=correlation_id, now=now,
                     detail=detail)
        audit_record(actor=actor, action="waitlist.standing_release", clinic=clinic, target_ref=offer.ref,
                     reason=(reason or "released by the patient")[:200], correlation_id=correlation_id,
                     system_label="release", result=detail)
        return offer, vacancy


def _entry_waits_again(locks: OfferLocks, *, now: datetime) -> None:
    """BOOKED → WAITING, held back (as after a decline) from offers like the released one."""
    policy = policy_current(clinic=locks.vacancy.clinic)
    similar = policy.decline_suppression_scope == SuppressionScope.SIMILAR
    try:
        with transaction.atomic():
            cas_update(
                locks.entry, expected_status=EntryStatus.BOOKED, status=EntryStatus.WAITING,
                suppressed_until=now + timedelta(hours=policy.decline_suppression_hours),
                suppressed_practitioner_id=locks.vacancy.practitioner_id if similar else None,
                suppressed_like_start=locks.vacancy.starts_at if similar else None,
            )
    except IntegrityError:
        # The patient joined the list again meanwhile for the same treatment and time (one live entry per
        # patient, treatment and window: ``wl_entry_one_live_per_window``): that entry waits; this one ends.
        locks.entry.refresh_from_db()
        cas_update(locks.entry, expected_status=EntryStatus.BOOKED, status=EntryStatus.WITHDRAWN,
                   withdraw_reason="STANDING_RELEASED: another entry of the patient waits")
