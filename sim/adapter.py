"""The one place the simulator touches the product: set-up rows and the waitlist commands.

Every call goes through the real services (``waitlist.services``, ``scheduling.services``,
``common.outbox``) with an explicit ``now``; the caller also travels the process clock there
(time-machine), so ``auto_now`` columns and the outbox's own timestamps agree. When the loop's
services change (new policy fields, a different cascade), adapt them here.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta

from django.db.models import Exists, OuterRef, Q, Sum

from common.errors import DomainError

from .generator import Booking, Entry, Month

# What ``matcher.ineligibility`` answers for an entry the product may offer the vacancy now. Any reason
# (a cap, a suppression, consent, an overlap) means a dispatch for it now would find nobody new.
PASSED_OVER = {None}


@dataclass(frozen=True)
class PolicySpec:
    """A policy as the product can express it (``WaitlistPolicy`` fields, published with ``policy_publish``)."""

    name: str
    label: str
    hold_minutes: int = 15
    min_lead_minutes: int = 60
    weekly_offer_cap: int | None = 8  # the product's defaults (``WaitlistPolicy``)
    decline_suppression_hours: int = 6
    quiet_hours: bool = True
    contact_cap_per_day: int = 3  # 0: no cap (the policy field empty)
    decision_gate: str = "REQUIRED"  # the product's default; NOT_USED: no reliability decision is read
    use_priority: bool = True  # False: every entry rank 0 (the peer has no priority)
    use_practitioner: bool = True  # False: entries take any practitioner (the peer ignores preferences)
    # False: entries are put on the list as "any time" (the peer's list has no availability field); a patient
    # offered a time they cannot come then declines (``Month.reply``).
    use_availability: bool = True
    standing_acceptance: bool = True  # the policy field; False: nobody is booked automatically (the peer has none)
    extra: dict = field(default_factory=dict)  # further policy fields, or a modelled policy's own knobs
    modelled: str = ""  # "" → real services; else the name of a model in sim.models
    shadow: dict = field(default_factory=dict)  # a candidate policy observed in SHADOW beside this one
    months_share: float = 1.0  # the share of the scale's months it runs on (the first ones): feature-off runs
    # The product's acknowledgement job (issue #39: ``acknowledgements_run``, beat's) runs: a standing booking its
    # patient has not acknowledged is reminded and released at its stored times, and the slot refilled. False: the
    # job never runs (the product before #39; ``sim.acknowledge`` for the modelled competitors).
    release_unacknowledged: bool = True

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class World:
    month: Month
    spec: PolicySpec
    clinic: object = None
    practitioners: list = field(default_factory=list)
    treatment: object = None
    patients: dict = field(default_factory=dict)  # entry key → Patient
    entry_refs: dict = field(default_factory=dict)  # entry key → entry ref
    entry_ids: dict = field(default_factory=dict)  # entry key → entry id
    appointment_refs: dict = field(default_factory=dict)  # booking key → appointment ref
    policy: object = None  # the published WaitlistPolicy row (it does not change during a run)
    weekly_cap: bool = False  # whether that row caps offers per week (the engine wakes capped entries)


@contextmanager
def no_task_queue():
    """The product queues the cascade and delivery runs as Celery tasks on commit; the simulator runs that
    dispatch itself at the same instant (engine ``_cascade``) and delivers due notices itself, so the broker is
    not used."""
    from waitlist import tasks

    originals = tasks.dispatch_vacancy.delay, tasks.deliver_notices.delay
    tasks.dispatch_vacancy.delay = lambda vacancy_id: None
    tasks.deliver_notices.delay = lambda **kw: None
    try:
        yield
    finally:
        tasks.dispatch_vacancy.delay, tasks.deliver_notices.delay = originals


@contextmanager
def matcher_clock_stopped():
    """The matcher's time budget counts wall time, which depends on the machine: within a run its clock stands
    still, so the same seed makes the same offers on any machine (the page and candidate budgets still apply)."""
    from waitlist.dispatch import matcher

    original, matcher.budget_clock = matcher.budget_clock, lambda: 0.0
    try:
        yield
    finally:
        matcher.budget_clock = original


@contextmanager
def flag_reads_cached():
    """The waitlist flag is switched on once before the runs and never changes during one, so its read
    (one query with three subqueries, on every dispatch) is answered from memory within a run."""
    from scheduling.services import features

    original, seen = features.feature_state, {}

    def cached(name, clinic):
        key = (name, clinic.pk)
        if key not in seen:
            seen[key] = original(name, clinic)
        return seen[key]

    features.feature_state = cached
    try:
        yield
    finally:
        features.feature_state = original


@contextmanager
def policy_reads_cached():
    """A run publishes its policy once, at set-up, and never changes it: from then on the newest-policy read (one
    statement on every dispatch, delivery, expiry and claim, ``policy_current``'s prepared query) is answered from
    memory. The query is found among the public ``PreparedQuery.instances`` by the model it reads."""
    from common.fastpath import PreparedQuery
    from waitlist.models import WaitlistPolicy

    queries = [q for q in PreparedQuery.instances
               if q.build(*[0 if kind is int else "" for kind in q.kinds]).model is WaitlistPolicy]
    seen: dict = {}

    def cached(query):
        def first(*values, key=None):
            if values not in seen:
                policy = PreparedQuery.first(query, *values, key=key)
                if policy is None:
                    return None
                seen[values] = policy
            return seen[values]
        return first

    for query in queries:
        query.first = cached(query)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for query in queries:
            del query.first


def enable_waitlist() -> None:
    from scheduling.services.features import feature_set

    feature_set(name="waitlist", actor=None, reason="simulation", enabled=True, all_tenants=True)


def policy_fields(spec: PolicySpec, month: Month) -> dict:
    """The spec as ``WaitlistPolicy`` fields: quiet hours and the daily contact cap are policy fields
    (clinic settings no longer hold them); ``extra`` keys only where the policy has them."""
    from waitlist.policy.services import PUBLISHABLE_FIELDS

    p = month.params
    quiet = (time.fromisoformat(p.quiet_start), time.fromisoformat(p.quiet_end)) if spec.quiet_hours else (None, None)
    values = {
        "hold_minutes": spec.hold_minutes,
        "min_lead_minutes": spec.min_lead_minutes,
        "weekly_offer_cap": spec.weekly_offer_cap,
        "decline_suppression_hours": spec.decline_suppression_hours,
        "quiet_hours_start": quiet[0],
        "quiet_hours_end": quiet[1],
        "contact_cap_per_day": spec.contact_cap_per_day or None,
        "decision_gate": spec.decision_gate,
        "confirmation": "ON_ACCEPT",  # the claim page's accept books at once (the peer's rule too)
        "standing_acceptance": spec.standing_acceptance,
    }
    values = {k: v for k, v in values.items() if k in PUBLISHABLE_FIELDS or k != "standing_acceptance"}
    values.update({k: v for k, v in spec.extra.items() if k in PUBLISHABLE_FIELDS})
    return values


def setup(month: Month, spec: PolicySpec, run_label: str) -> World:
    """A fresh tenant and clinic for one (month, policy) run, its policy, patients and the bookings
    that will be cancelled (the others never touch the waitlist), all at the month's start."""
    from scheduling.models import Clinic, Patient, Practitioner, TenantGroup, Treatment
    from scheduling.services import appointment_book
    from scheduling.services.consent import consent_record
    from waitlist.services import decision_record, policy_publish

    p = month.params
    world = World(month=month, spec=spec)
    tenant = TenantGroup.objects.create(name=f"Sim {run_label}")
    settings = {"notification": {"provider": "console"}}
    world.clinic = Clinic.objects.create(
        tenant_group=tenant, name=f"Sim clinic {run_label}", timezone=p.timezone, settings=settings,
        waitlist_hold_minutes=spec.hold_minutes, min_lead_minutes=spec.min_lead_minutes,
    )
    world.practitioners = [Practitioner.objects.create(clinic=world.clinic, name=f"Dr. Sim {i}")
                           for i in range(p.practitioners)]
    world.treatment = Treatment.objects.create(clinic=world.clinic, name="Consultation",
                                               duration_minutes=p.slot_minutes)
    world.policy = policy_publish(clinic=world.clinic, **policy_fields(spec, month))
    world.weekly_cap = getattr(world.policy, "weekly_offer_cap", None) is not None
    if spec.shadow:
        from waitlist.services import shadow_publish

        shadow_publish(clinic=world.clinic, actor=None, reason="simulation", changes=spec.shadow)
    for entry in month.entries:
        # Email only: the console provider logs refs, never the address.
        world.patients[entry.key] = Patient.objects.create(
            tenant_group=tenant, clinic=world.clinic, display_name=f"Sim {entry.patient}",
            email=f"{entry.patient}@sim.example",
        )
        # Consent to waitlist messages (the clinic's import); an opt-out later revokes it.
        consent_record(patient=world.patients[entry.key], channels=["EMAIL"], state="GRANTED", source="IMPORT",
                       actor_label="simulation", now=month.start)
        if month.has_decision(entry.key):  # the reliability feed knows most patients, not all
            decision_record(clinic=world.clinic, patient=world.patients[entry.key], decision_ref=f"sim-{entry.key}",
                            status="FRESH", expires_at=month.end + timedelta(days=60), now=month.start)
    for booking in month.cancellations:
        holder = Patient.objects.create(tenant_group=tenant, clinic=world.clinic,
                                        display_name=f"Sim holder {booking.key}")
        world.appointment_refs[booking.key] = appointment_book(
            clinic=world.clinic, patient=holder, practitioner=world.practitioners[booking.practitioner],
            treatment=world.treatment, starts_at=booking.starts_at, status="CONFIRMED",
        ).ref
    return world


def policy_rules(world: World) -> dict:
    """The published policy's fields, as the run really ran under them (its result file states them)."""
    from waitlist.policy.services import PUBLISHABLE_FIELDS

    return {name: (str(v) if isinstance(v, time) else v)
            for name in PUBLISHABLE_FIELDS for v in [getattr(world.policy, name)]}


def entry_add(world: World, entry: Entry, now: datetime) -> None:
    from waitlist.joining.availability import ANY_TIME
    from waitlist.services import entry_create

    row = entry_create(
        clinic=world.clinic, patient=world.patients[entry.key], treatment=world.treatment,
        earliest=entry.earliest, latest=entry.latest,
        practitioner=(world.practitioners[entry.practitioner]
                      if entry.practitioner is not None and world.spec.use_practitioner else None),
        priority_rank=entry.band if world.spec.use_priority else 0,
        availability=entry.availability if world.spec.use_availability else ANY_TIME, now=entry.waiting_since,
    )
    world.entry_refs[entry.key] = row.ref
    world.entry_ids[entry.key] = row.pk
    notice = world.month.standing_notice(entry.key)
    if notice is not None and world.spec.standing_acceptance:
        # The patient ticks "book me automatically" when they join (the API's word for them).
        from waitlist.services import standing_acceptance_record

        standing_acceptance_record(clinic=world.clinic, entry_ref=row.ref, state="GRANTED", source="API",
                                   min_notice_minutes=notice, reason="joined with automatic booking", now=now)


def eligible_vacancies(world: World, entry_key: str, vacancy_refs: list[str], now: datetime) -> list[str]:
    """Which of these vacancies the entry may be offered now by the product's own hard eligibility
    (``matcher.ineligibility``: status, window, suppression, weekly cap, consent, overlap…), read-only."""
    from waitlist.dispatch.matcher import ineligibility
    from waitlist.models import Vacancy, WaitlistEntry

    if not vacancy_refs:
        return []
    entry = WaitlistEntry.objects.filter(pk=world.entry_ids[entry_key], status="WAITING").first()
    if entry is None:
        return []
    vacancies = {v.ref: v for v in Vacancy.objects.filter(clinic=world.clinic, ref__in=vacancy_refs)
                 .select_related("clinic", "resource")}
    return [ref for ref in vacancy_refs if ref in vacancies
            and ineligibility(entry=entry, vacancy=vacancies[ref], policy=world.policy, now=now) in PASSED_OVER]


def entry_suppressed_until(world: World, entry_key: str) -> datetime | None:
    """The entry row's ``suppressed_until`` (after a decline), where the product has it."""
    from waitlist.models import WaitlistEntry

    row = WaitlistEntry.objects.filter(pk=world.entry_ids[entry_key]).values("suppressed_until").first()
    return row["suppressed_until"] if row else None


def entry_waiting(world: World, entry_key: str) -> bool:
    from waitlist.models import WaitlistEntry

    return WaitlistEntry.objects.filter(clinic=world.clinic, ref=world.entry_refs.get(entry_key, ""),
                                        status="WAITING").exists()


def entry_opt_out(world: World, entry: Entry, now: datetime) -> None:
    """The patient follows the opt-out link in a notice: every channel REVOKED (the entry stays on the list;
    the matcher passes them over with NO_CONTACT_CONSENT and delivery skips CONSENT_REVOKED)."""
    from scheduling.services.consent import consent_record

    consent_record(patient=world.patients[entry.key], channels=["EMAIL", "SMS"], state="REVOKED",
                   source="OPT_OUT_LINK", actor_label="simulation", now=now)


def cancel(world: World, booking: Booking, now: datetime) -> str | None:
    """The cancellation; returns the vacancy's ref when the product opened one."""
    from waitlist.services import appointment_cancel_with_vacancy

    _, vacancy = appointment_cancel_with_vacancy(
        clinic=world.clinic, appointment_ref=world.appointment_refs[booking.key], reason="PATIENT", now=now
    )
    return vacancy.ref if vacancy is not None else None


def dispatch(world: World, vacancy_ref: str, now: datetime) -> tuple[str, int | None]:
    """(outcome or refusal code, the offered entry's id when an offer was made: OFFERED, or BOOKED under the
    entry's standing acceptance)."""
    from waitlist.services import vacancy_dispatch

    try:
        result = vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy_ref, now=now)
    except DomainError as exc:
        return exc.code, None
    made = result.outcome in ("OFFERED", "BOOKED") and result.offer
    return result.outcome, result.offer.entry_id if made else None


def release(world: World, offer_ref: str, now: datetime) -> tuple[str, str | None]:
    """The patient releases a standing booking by the booking notice's release link: (RELEASED and the reopened
    vacancy's ref, or the refusal code and None). The product reopens the same vacancy; the engine dispatches it
    (the cascade)."""
    from waitlist.models import Offer
    from waitlist.services import standing_release

    offer = Offer.objects.get(clinic=world.clinic, ref=offer_ref)
    try:
        _, vacancy = standing_release(clinic=world.clinic, offer_ref=offer_ref, patient=offer.patient, now=now)
    except DomainError as exc:
        return exc.code, None
    return "RELEASED", vacancy.ref


def acknowledge(world: World, offer_ref: str, now: datetime) -> bool:
    """The patient opens their automatic booking's link: the product's ``acknowledgement_record`` (False when there
    was nothing to acknowledge: released already, or no release point)."""
    from waitlist.models import Offer
    from waitlist.texts.models import AckVia
    from waitlist.texts.services.acknowledgement import acknowledgement_record

    offer_id = Offer.objects.filter(clinic=world.clinic, ref=offer_ref).values_list("pk", flat=True).get()
    return acknowledgement_record(offer_id=offer_id, via=AckVia.LINK, now=now)


def ack_times_stored(offer_id: int) -> list[datetime]:
    """The ``remind_at`` and ``release_at`` the product stored for an automatic booking (its job's times)."""
    from waitlist.texts.models import BookingAck

    row = BookingAck.objects.filter(offer_id=offer_id).values_list("remind_at", "release_at").first()
    return sorted(set(row)) if row else []


def acknowledgements(world: World, now: datetime) -> tuple[list[tuple[str, str]], list[datetime]]:
    """The product's acknowledgement job at ``now`` (``acknowledgements_run``: reminders queued, unacknowledged
    bookings released), its reminders delivered: ((offer ref, reopened vacancy ref) of each booking it released,
    the times reminders deferred by quiet hours fall due)."""
    from common.models import OutboxMessage
    from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC
    from waitlist.texts.models import BookingAck
    from waitlist.texts.services.acknowledgement import acknowledgements_run

    counts = acknowledgements_run(now=now, limit=500)
    released = []
    if counts["released"]:
        released = list(BookingAck.objects.filter(clinic=world.clinic, released_at=now, closed_code="UNACKNOWLEDGED")
                        .order_by("id").values_list("offer__ref", "offer__vacancy__ref"))
    pending: list[datetime] = []
    if counts["reminded"]:
        deliver(now)
        pending = list(OutboxMessage.objects.filter(topic=BOOKING_CONFIRMED_TOPIC, status="PENDING",
                                                    payload__reminder=True, next_attempt_at__gt=now)
                       .values_list("next_attempt_at", flat=True))
    return released, pending


def review(world: World, vacancy_ref: str, now: datetime) -> str:
    """Staff resolve a REVIEW vacancy (its candidate has no FRESH decision): they vouch for the patient
    (PROMOTE), or pass them over (SKIP) when the product says the candidate is no longer eligible."""
    from waitlist.models import Vacancy
    from waitlist.offers.recovery import vacancy_review_resolve

    # Staff work the review queue as it is when they look: a vacancy no longer in it is not touched.
    state = Vacancy.objects.filter(clinic=world.clinic, ref=vacancy_ref).values_list("status", "starts_at").first()
    if state is None or state[0] != "REVIEW":
        return "LEFT_REVIEW_BEFORE_STAFF"
    if state[1] <= now:
        return "STARTED_BEFORE_STAFF"
    for resolution in ("PROMOTE", "SKIP"):
        try:
            return vacancy_review_resolve(clinic=world.clinic, vacancy_ref=vacancy_ref, actor=None,
                                          reason="simulation", resolution=resolution, now=now).outcome
        except DomainError as exc:
            if exc.code != "CANDIDATE_INELIGIBLE":
                return exc.code
    return "CANDIDATE_INELIGIBLE"


def waiting_vacancies(world: World, now: datetime) -> list[tuple[str, str, datetime | None]]:
    """(ref, status, waiting_until) of not-started OPEN vacancies that wait (quiet hours, contact caps) and
    of REVIEW ones: the engine wakes them then (the product's reconcile would, every minute)."""
    from waitlist.models import Vacancy

    return list(Vacancy.objects.filter(clinic=world.clinic, starts_at__gt=now)
                .filter(Q(status="OPEN", waiting_until__isnull=False) | Q(status="REVIEW"))
                .order_by("id").values_list("ref", "status", "waiting_until"))


def deliver(now: datetime) -> None:
    """Run the outbox worker until nothing is due at ``now`` (sends, deferrals, skips): a round that
    leased fewer rows than its limit left nothing due."""
    from common.outbox import outbox_deliver_due

    while sum(outbox_deliver_due(worker="sim", limit=200, now=now).values()) >= 200:
        pass


def accept(world: World, offer_ref: str, now: datetime) -> str:
    """The claim page's accept: claim, then book at once. Returns BOOKED or the refusal code."""
    from waitlist.models import Offer
    from waitlist.services import offer_book, offer_claim

    offer = Offer.objects.get(clinic=world.clinic, ref=offer_ref)
    try:
        receipt = offer_claim(clinic=world.clinic, offer_ref=offer_ref, expected_version=offer.version,
                              patient=offer.patient, now=now)
    except DomainError as exc:
        return exc.code
    try:
        offer_book(clinic=world.clinic, hold_ref=receipt.hold_ref, now=now)
    except DomainError as exc:
        # A policy that confirms on accept has booked already; anything else is a refusal.
        if not Offer.objects.filter(pk=offer.pk, entry__status="BOOKED").exists():
            return exc.code
    return "BOOKED"


def late_accept(world: World, offer_ref: str, now: datetime) -> str:
    """The claim page's accept after the offer ended unanswered: the product takes the time up again while it
    is free, then books it (``offer_late_accept_and_book``, as the claim page). Returns BOOKED, KEPT (the time is
    offered to someone else: dispatch takes the yes up if it comes back) or the refusal code."""
    from waitlist.models import Offer
    from waitlist.services import offer_late_accept_and_book

    patient = Offer.objects.select_related("patient").get(clinic=world.clinic, ref=offer_ref).patient
    try:
        renewed, booked = offer_late_accept_and_book(clinic=world.clinic, offer_ref=offer_ref, patient=patient,
                                                     now=now)
    except DomainError as exc:
        return exc.code
    if renewed.kept:
        return "KEPT"
    return "BOOKED" if booked.booked else booked.booking_error or "NOT_BOOKED"


def decline(world: World, offer_ref: str, now: datetime) -> str:
    from waitlist.services import offer_decline

    try:
        offer_decline(clinic=world.clinic, offer_ref=offer_ref, reason="PATIENT_DECLINED", now=now)
    except DomainError as exc:
        return exc.code
    return "DECLINED"


def expire(now: datetime) -> None:
    """The expiry job's work (``expire_run`` without its ``JobRun`` record, readiness evidence the run does not
    read): every due offer expired, its hold released, the cascade queued."""
    from waitlist.offers.offers import offers_expire_due

    offers_expire_due(now=now, limit=500)


def reconcile(now: datetime) -> None:
    from waitlist.services import reconcile_run

    reconcile_run(now=now, limit=500)


def offers_since(world: World, last_id: int) -> list:
    from waitlist.models import Offer

    return list(Offer.objects.filter(clinic=world.clinic, id__gt=last_id).order_by("id")
                .values("id", "ref", "vacancy__ref", "vacancy__vacancy_key", "entry__ref", "expires_at", "created_at",
                        "standing", "release_until", "renews_id"))


def offer_states_with_vacancy(world: World, refs: list[str], now: datetime) -> dict[str, tuple[str, int, bool]]:
    """offer ref → (its status, its vacancy's id, whether that vacancy may be offered again now: OPEN, not
    started, no active offer), in one statement."""
    from django.db.models import BooleanField, ExpressionWrapper

    from waitlist.models import ACTIVE_OFFER_STATUSES, Offer

    active = Offer.objects.filter(vacancy=OuterRef("vacancy_id"), status__in=ACTIVE_OFFER_STATUSES)
    open_now = ExpressionWrapper(Q(vacancy__status="OPEN", vacancy__starts_at__gt=now) & ~Exists(active),
                                 output_field=BooleanField())
    rows = (Offer.objects.filter(clinic=world.clinic, ref__in=refs).annotate(open_now=open_now)
            .values_list("ref", "status", "vacancy_id", "open_now"))
    return {ref: (status, vacancy_id, bool(open_now)) for ref, status, vacancy_id, open_now in rows}


def notices(refs: list[str], standing: list[str] | None = None) -> dict[str, tuple]:
    """offer ref → (status, sent_at, next_attempt_at, (notified_at, expires_at) of the offer as stored) of its
    ``waitlist.offer_made`` message (read in the same statement: delivery moves ``expires_at``), and for the
    ``standing`` offers (booked at once) of their ``waitlist.booking_confirmed`` message instead (window None)."""
    from django.db.models import Subquery

    from common.models import OutboxMessage
    from waitlist.models import Offer

    offer = Offer.objects.filter(ref=OuterRef("aggregate_ref"))
    rows = (OutboxMessage.objects.filter(topic="waitlist.offer_made", aggregate_ref__in=refs)
            .annotate(offer_notified_at=Subquery(offer.values("notified_at")[:1]),
                      offer_expires_at=Subquery(offer.values("expires_at")[:1]))
            .values_list("aggregate_ref", "status", "sent_at", "next_attempt_at", "offer_notified_at",
                         "offer_expires_at"))
    found = {ref: (status, sent, next_at, (notified, expires))
             for ref, status, sent, next_at, notified, expires in rows}
    if standing:
        # The booking notice itself, not the acknowledgement job's reminder of it (in Python: an ``exclude`` on a
        # JSON key the row lacks compares with NULL and would drop every row).
        booked = OutboxMessage.objects.filter(topic="waitlist.booking_confirmed", payload__offer__in=standing)
        found |= {r.payload["offer"]: (r.status, r.sent_at, r.next_attempt_at, None) for r in booked
                  if not r.payload.get("reminder")}
    return found


def open_vacancies_without_offer(world: World, now: datetime) -> list[tuple[str, str]]:
    """(ref, vacancy_key) of OPEN, not started vacancies with no active offer, oldest first."""
    from waitlist.models import ACTIVE_OFFER_STATUSES, Offer, Vacancy

    active = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)
    return list(
        Vacancy.objects.filter(clinic=world.clinic, status="OPEN", starts_at__gt=now)
        .exclude(Exists(active)).order_by("id").values_list("ref", "vacancy_key")
    )


def export(world: World) -> dict:
    """The run as the metrics read it: vacancies, offers (with notice times) and booked entries."""
    from common.models import OutboxMessage
    from waitlist.models import DispatchNote, Offer, OfferEvent, Vacancy

    entry_keys = {ref: key for key, ref in world.entry_refs.items()}
    booking_keys = {f"appointment:{ref}": key for key, ref in world.appointment_refs.items()}
    # The booking that stands: the BOOKED event of the vacancy's offer still ACCEPTED (a released standing
    # booking's offer is WITHDRAWN, and its vacancy counts only if the cascade refilled it).
    booked_at = dict(OfferEvent.objects.filter(clinic=world.clinic, reason_code="BOOKED", offer__status="ACCEPTED")
                     .values_list("offer__vacancy_id", "created_at"))
    vacancies = []
    for v in Vacancy.objects.filter(clinic=world.clinic).order_by("id"):
        vacancies.append({"key": booking_keys[v.vacancy_key], "opened_at": v.created_at, "starts_at": v.starts_at,
                          "filled_at": booked_at.get(v.pk) if v.status == "FILLED" else None, "status": v.status,
                          "exhausted": v.exhausted_at is not None and v.status != "FILLED"})
    sent = dict(OutboxMessage.objects.filter(clinic_ref=world.clinic.ref, topic="waitlist.offer_made",
                                             sent_at__isnull=False).values_list("aggregate_ref", "sent_at"))
    # A standing booking's one notice is its booking confirmation (no offer notice is sent for it).
    # The acknowledgement job's reminders are that notice again (``payload.reminder``): messages of their own.
    reminders = []
    for payload, at in OutboxMessage.objects.filter(
            clinic_ref=world.clinic.ref, topic="waitlist.booking_confirmed", sent_at__isnull=False,
            payload__has_key="release_until").order_by("id").values_list("payload", "sent_at"):
        if payload.get("reminder"):
            reminders.append((payload["offer"], at))
        else:
            sent[payload["offer"]] = at
    closed = dict(OfferEvent.objects.filter(clinic=world.clinic).exclude(to_status__in=["OFFERED", "ACCEPTED"])
                  .values_list("offer_id", "created_at"))
    offers = []
    for o in Offer.objects.filter(clinic=world.clinic).select_related("vacancy", "entry").order_by("id"):
        offers.append({"vacancy": booking_keys[o.vacancy.vacancy_key], "entry": entry_keys[o.entry.ref],
                       "at": o.created_at, "notified_at": sent.get(o.ref), "status": o.status,
                       "closed_at": closed.get(o.pk), "booked": o.entry.status == "BOOKED" and o.status == "ACCEPTED",
                       "standing": o.standing})
    messages = [{"entry": o["entry"], "at": o["notified_at"], "kind": "BOOKING" if o["standing"] else "OFFER"}
                for o in offers if o["notified_at"]]
    entry_of = dict(Offer.objects.filter(clinic=world.clinic, standing=True).values_list("ref", "entry__ref"))
    messages += [{"entry": entry_keys[entry_of[ref]], "at": at, "kind": "REMINDER"} for ref, at in reminders
                 if at < world.month.end]
    notes = DispatchNote.objects.filter(clinic=world.clinic, entry__isnull=False)
    run = {"vacancies": vacancies, "offers": offers, "messages": messages,
           "dispatch_notes": dict(notes.values_list("reason_code").annotate(n=Sum("times")).order_by())}
    if world.spec.shadow:
        from waitlist.figures.fairness import shadow_summary

        summary = shadow_summary(clinic=world.clinic, differences=0)
        run["shadow"] = {k: summary[k] for k in ("changes", "observations", "agreed", "agreement_rate",
                                                 "differences_by_reason")}
    return run
