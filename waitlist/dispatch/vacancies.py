"""Opening a vacancy when a CONFIRMED appointment is cancelled, and dispatching it to one candidate."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from common.cas import cas_update
from common.errors import DomainError, NotFound
from common.fastpath import PreparedQuery, Semaphore
from common.services import audit_record
from common.transactions import own_transaction
from scheduling import services as scheduling
from scheduling.models import Appointment, AppointmentStatus, Clinic
from scheduling.services.features import feature_enabled
from waitlist import queries
from waitlist.dispatch.context import dispatch_context
from waitlist.dispatch.fence import active_offer, with_active_offer
from waitlist.dispatch.locks import lock_vacancy
from waitlist.dispatch.promotion import RESTART, DispatchResult, offer_next
from waitlist.effects import queue_dispatch, slot_of
from waitlist.models import DISPATCHABLE_VACANCY_STATUSES, Offer, Vacancy, VacancyStatus, WaitlistPolicy
from waitlist.offers.accept import late_yes_take_up
from waitlist.policy.services import policy_current

logger = logging.getLogger("waitlist")

#: Background dispatches (tasks, the dispatcher loop) running at once across the deployment: more than the
#: database has cores only pass over each other's locked entries and fight for the CPU (``common.fastpath.Semaphore``).
#: A dispatch a person asked for (``vacancy_dispatch``: staff, the API) takes none.
DISPATCH_SLOTS = Semaphore(
    "waitlist.dispatch",
    size=lambda: settings.WAITLIST_DISPATCH_CONCURRENCY,
    wait_seconds=lambda: settings.WAITLIST_DISPATCH_SLOT_WAIT_SECONDS,
)


def appointment_cancel_with_vacancy(*, clinic: Clinic, appointment_ref: str, reason: str,
                                    expected_version: int | None = None,
                                    now: datetime | None = None, reason_code: str = "",
                                    cancelled_by: str = "", actor=None, idempotency_key: str = "",
                                    correlation_id: str = "") -> tuple[Appointment, Vacancy | None]:
    """Cancel an appointment and, if it was CONFIRMED and starts at least the policy's lead time
    from now, open a vacancy for its slot (the cancelling patient excluded) in the same
    transaction; dispatch is queued for after the commit. Every refusal is the cancel's, before its first write
    (``own_transaction``: no savepoint inside a caller's transaction). Every cancellation writes one audit row
    (``appointment.cancel``: ``actor``, the signed-in user, or ``system:cancel``)."""
    now = now or timezone.now()
    with own_transaction():
        appointment = scheduling.appointment_cancel(
            clinic=clinic, appointment_ref=appointment_ref, reason=reason, expected_version=expected_version,
            reason_code=reason_code, cancelled_by=cancelled_by,
        )
        vacancy = _vacancy_opened(clinic, appointment, now)
        audit_record(actor=actor, action="appointment.cancel", clinic=clinic, target_ref=appointment.ref,
                     reason=reason or reason_code, idempotency_key=idempotency_key, correlation_id=correlation_id,
                     system_label="cancel",
                     result={"status": appointment.status, "version": appointment.version,
                             "previous_status": appointment.previous_status, "reason_code": reason_code,
                             "cancelled_by": appointment.cancelled_by, "vacancy": vacancy.ref if vacancy else None})
        return appointment, vacancy


def _vacancy_opened(clinic: Clinic, appointment: Appointment, now: datetime) -> Vacancy | None:
    """The vacancy a cancelled CONFIRMED appointment far enough ahead opens (its dispatch queued), else None."""
    if appointment.previous_status != AppointmentStatus.CONFIRMED:
        return None
    policy = policy_current(clinic=clinic)
    if appointment.starts_at - now < timedelta(minutes=policy.min_lead_minutes):
        return None
    vacancy = Vacancy.objects.create(
        vacancy_key=f"appointment:{appointment.ref}",
        clinic=clinic,
        tenant_group_id=clinic.tenant_group_id,
        **slot_of(appointment),
        excluded_patient_id=appointment.patient_id,
        source_appointment=appointment,
    )
    logger.info("vacancy %s opened from %s", vacancy.ref, appointment.ref)
    queue_dispatch(vacancy.pk)
    return vacancy


def vacancy_dispatch(
    *,
    clinic: Clinic,
    vacancy_ref: str,
    actor=None,
    now: datetime | None = None,
    correlation_id: str = "",
) -> DispatchResult:
    """Offer the vacancy (a ref, scoped to ``clinic``: a foreign one is NotFound) to the best eligible
    candidate; see ``vacancy_dispatch_by_id``. A person asked for it (staff, an API client): it runs at once,
    without a dispatch slot (slots pace background work, and a person must not wait behind it)."""
    ref = vacancy_ref if isinstance(vacancy_ref, str) else ""
    return _dispatch(_VACANCY.filter(clinic=clinic, ref=ref).first(), actor=actor, now=now,
                     correlation_id=correlation_id)


def vacancy_dispatch_by_id(
    *,
    vacancy_id: int,
    actor=None,
    now: datetime | None = None,
    correlation_id: str = "",
) -> DispatchResult:
    """Offer the vacancy to the best eligible candidate: at most one active offer ever results.

    Safe to run from many workers at once: candidates are read without locks, and promotion
    re-validates under the vacancy fence; a worker that finds an offer committed by another
    answers ALREADY_OFFERED and writes nothing. The id comes from inside the domain (a task, reconcile);
    a caller holding a ref uses ``vacancy_dispatch``, which scopes it to the clinic. Background work: it
    takes a dispatch slot (``DISPATCH_SLOTS``), waiting for one if all are held.
    """
    with DISPATCH_SLOTS.held():
        return _dispatch(_VACANCY_BY_ID.first(vacancy_id), actor=actor, now=now, correlation_id=correlation_id)


_VACANCY = with_active_offer(Vacancy.objects.select_related("clinic", "resource"))
#: Every background dispatch's first read, by id: compiled once per process and planned once per connection
#: (its planning was most of its PostgreSQL time in the storm).
_VACANCY_BY_ID: PreparedQuery[Vacancy] = PreparedQuery(
    lambda vacancy_id: _VACANCY.filter(pk=vacancy_id).order_by("pk")[:1], int)


@dataclass
class LoopCache:
    """What one dispatcher loop (``vacancies_dispatch``, one batch) reads once per clinic instead of once per
    vacancy: the flag's answer, the clinic row and its policy. A single dispatch has none and reads each fresh.

    Switching the flag off stops the next batch; an offer made on a cached policy is fenced by the newest
    policy's id under the vacancy lock (RESTART: ``forget_policy``), and an answer that writes nothing under
    the fence is confirmed against the newest policy (``confirm_policy``)."""

    features: dict[int, bool] = field(default_factory=dict)
    clinics: dict[int, Clinic] = field(default_factory=dict)
    policies: dict[int, WaitlistPolicy] = field(default_factory=dict)

    def clinic(self, clinic_id: int) -> Clinic:
        if clinic_id not in self.clinics:
            self.clinics[clinic_id] = Clinic.objects.get(pk=clinic_id)
        return self.clinics[clinic_id]

    def enabled(self, clinic: Clinic) -> bool:
        if clinic.pk not in self.features:
            self.features[clinic.pk] = feature_enabled("waitlist", clinic)
        return self.features[clinic.pk]

    def policy(self, clinic: Clinic) -> WaitlistPolicy:
        if clinic.pk not in self.policies:
            self.policies[clinic.pk] = policy_current(clinic=clinic)
        return self.policies[clinic.pk]

    def forget_policy(self, clinic_id: int) -> None:
        self.policies.pop(clinic_id, None)

    def confirm_policy(self, clinic: Clinic, used: WaitlistPolicy) -> bool:
        """Whether ``used`` is still the clinic's newest policy (else the newest is cached instead)."""
        newest = policy_current(clinic=clinic)
        if newest.pk == used.pk:
            return True
        self.policies[clinic.pk] = newest
        return False


def _settled(vacancy: Vacancy, now: datetime, *, annotated: bool = False) -> DispatchResult | None:
    """Unlocked pre-check (the fence re-checks): a closed vacancy or one with an offer out. A started one
    without an offer is closed (``STARTED``) under its lock. ``annotated``: ``vacancy.active_offer_id`` was
    read with the vacancy (``with_active_offer``) and is trusted instead of asking again."""
    if annotated:
        active = Offer.objects.get(pk=vacancy.active_offer_id) if vacancy.active_offer_id else None
    else:
        active = active_offer(vacancy.pk)
    if active is not None:
        return DispatchResult("ALREADY_OFFERED", active)
    if vacancy.status not in DISPATCHABLE_VACANCY_STATUSES:
        return DispatchResult("CLOSED")
    if vacancy.starts_at <= now:
        with transaction.atomic():
            locked = lock_vacancy(vacancy.pk)
            if locked.status in DISPATCHABLE_VACANCY_STATUSES and active_offer(locked.pk) is None:
                cas_update(
                    locked, expected_status=locked.status, status=VacancyStatus.CLOSED, close_reason="STARTED"
                )
        return DispatchResult("CLOSED")
    return None


def _dispatch(vacancy: Vacancy | None, *, actor, now: datetime | None, correlation_id: str,
              cache: LoopCache | None = None) -> DispatchResult:
    """Dispatch ``vacancy`` (up to three rounds when the policy or a decision changed while matching): its context
    read once a round (``context.dispatch_context``: the flag, the policy, the send window), then the candidate
    loop on it. ``cache``: the dispatcher loop's per-clinic reads (``LoopCache``); None reads each fresh."""
    if vacancy is None:
        raise NotFound()
    now = now or timezone.now()
    for round_ in range(3):
        early = _settled(vacancy, now, annotated=round_ == 0)
        if early is not None:
            return early
        # Flag off (globally, tenant outside the allowlist, or this clinic): no new offer and so no new
        # notification. Closing a started vacancy above still runs; re-enabling dispatches again and
        # the partial unique index keeps it to one active offer. A late yes is taken up before the policy is read.
        late_yes = vacancy.late_yes_offer_id is not None
        ctx = dispatch_context(vacancy, actor=actor, now=now, correlation_id=correlation_id, cache=cache,
                               read_policy=not late_yes)
        correlation_id = ctx.correlation_id
        if not ctx.enabled:
            return DispatchResult("DISABLED")
        if late_yes:
            taken = late_yes_take_up(vacancy, now=now, correlation_id=correlation_id)
            if taken is not None:
                return taken
            ctx = dispatch_context(vacancy, actor=actor, now=now, correlation_id=correlation_id, cache=cache,
                                   known_on=True)
        result = offer_next(vacancy, context=ctx)
        if result.outcome == RESTART:
            if cache is not None:
                cache.forget_policy(vacancy.clinic_id)
        elif cache is not None and ctx.policy is not None and result.outcome in ("WAITING", "NO_CANDIDATE"):
            if cache.confirm_policy(vacancy.clinic, ctx.policy):
                return result
        else:
            return result
        vacancy.refresh_from_db()  # the policy or a decision changed while matching: match again
    return DispatchResult("NO_CANDIDATE")


#: How long a dispatcher loop's claim keeps other loops off a vacancy (a crashed loop's claim lapses).
CLAIM_SECONDS = 60
#: How long a dispatcher loop keeps its dispatch slot before it lets a waiter go first.
DISPATCH_TURN_SECONDS = 0.5

_VACANCY_FIELDS = queries.VACANCY_FIELDS


def _claim(vacancy_ids: list[int], *, after: int, now: datetime, until: datetime,
           release: int | None = None) -> tuple[Vacancy, int] | None:
    """(the vacancy this loop now holds, as stored, without its parents; its position in the list), or None.
    ``release``: this loop's previous claim, released by the same statement."""
    row = queries.vacancy_claim_next(vacancy_ids, after=after, now=now, until=until, release=release)
    if row is None:
        return None
    return Vacancy.from_db(connection.alias, [f.attname for f in _VACANCY_FIELDS], row[1:]), row[0]


def vacancies_dispatch(
    *, vacancy_ids: list[int], now: datetime | None = None, correlation_id: str = "", actor=None
) -> Iterator[tuple[int, DispatchResult]]:
    """The dispatcher loop (reconcile, and any number of racing workers): claim the next of
    ``vacancy_ids`` (in that order) nobody else holds (``FOR NO KEY UPDATE SKIP LOCKED``, then a short-lived
    ``dispatch_claimed_until`` marker), dispatch it, release it (with the next claim); yield
    ``(vacancy id, result)`` for each.

    Racing loops take different vacancies instead of all trying every one; the vacancy fence and the
    partial unique index still decide (a claim is an optimisation, never the guarantee). A refusal is a
    result whose outcome is the error's code. Ids come from inside the domain: no clinic scoping here.
    """
    now = now or timezone.now()
    until = now + timedelta(seconds=CLAIM_SECONDS)
    ids, after = list(vacancy_ids), 0
    cache = LoopCache()  # the flag, the clinic row and its policy: once per clinic per loop (one batch)
    held: int | None = None  # this loop's claim not yet released
    slot: int | None = None
    turn_ends = 0.0
    try:
        while ids:
            if time.monotonic() >= turn_ends:
                # A dispatch slot for one turn, not per vacancy: handing a slot over costs several round trips
                # and wake-ups. At the end of a turn the slot goes back, so a waiter (a single task) goes first.
                DISPATCH_SLOTS.release(slot)
                slot = DISPATCH_SLOTS.acquire()
                turn_ends = time.monotonic() + DISPATCH_TURN_SECONDS
            claimed = _claim(ids, after=after, now=now, until=until, release=held)
            if claimed is None:
                break
            vacancy, after = claimed
            held = vacancy.pk
            vacancy.clinic = cache.clinic(vacancy.clinic_id)
            vacancy.active_offer_id = None  # the claim saw none (``_settled``; the fence checks again)
            try:
                result = _dispatch(vacancy, actor=actor, now=now, correlation_id=correlation_id, cache=cache)
            except DomainError as exc:
                result = DispatchResult(exc.code)
            yield vacancy.pk, result
        held = None  # the last claim statement released it
    finally:
        try:
            if held is not None:  # stopped early (an error, the caller left the loop): release the claim now
                Vacancy.objects.filter(pk=held, dispatch_claimed_until=until).update(dispatch_claimed_until=None)
        finally:
            DISPATCH_SLOTS.release(slot)
