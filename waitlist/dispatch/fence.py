"""The vacancy fence: every promoter of one vacancy queues on its row lock (``fenced``: promotion's write,
``offer_write.promote_first_free``; staff review; a late accept), the vacancy's active offer, and what dispatch answers
(``DispatchResult``). Promotion's read under the fence lives here too (``fenced_first_free``: the fence, then the
first free entry of a run locked with the facts its offer's terms are decided on, ``lock_first_free``), with what one
promotion runs on (``Attempt``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Subquery

from common.fastpath import PreparedQuery
from common.notify import contact_cap_params
from scheduling.models import Patient
from waitlist import queries
from waitlist.dispatch import matcher
from waitlist.dispatch.locks import lock_vacancy
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    Offer,
    ShadowPolicy,
    ShadowStatus,
    Vacancy,
    WaitlistEntry,
    WaitlistPolicy,
)
from waitlist.reliability.feed import Decision
from waitlist.rules import terms
from waitlist.rules.reachability import Unreachable
from waitlist.rules.terms import RESTART, UNREACHABLE
from waitlist.rules.windows import NO_OFFER_BEFORE

# ``promote``'s outcomes besides ``DispatchResult``'s own, as the offer's terms name them: RESTART when the facts a
# candidate was chosen on changed (policy, decision: match again), UNREACHABLE when the candidate cannot be reached now
# (contact cap: ``waiting`` says why).
__all__ = ["RESTART", "UNREACHABLE", "Attempt", "DispatchResult", "Run", "UnderFence", "active_offer", "active_offers",
           "active_or_exhausted", "fenced", "fenced_first_free", "lock_first_free", "with_active_offer"]


@dataclass(frozen=True)
class DispatchResult:
    """``outcome``: OFFERED, BOOKED (a standing acceptance: offered and booked at once), ALREADY_OFFERED,
    NO_CANDIDATE, STAFF_REVIEW, DISABLED, CLOSED, or WAITING (nobody reachable now: ``waiting`` says why and until
    when; reconcile dispatches again)."""

    outcome: str
    offer: Offer | None = None
    stats: matcher.MatchStats | None = None
    waiting: Unreachable | None = None


def active_offers(vacancy_id):
    return Offer.objects.filter(vacancy_id=vacancy_id, status__in=ACTIVE_OFFER_STATUSES)


def active_offer(vacancy_id: int) -> Offer | None:
    return active_offers(vacancy_id).first()


def with_active_offer(vacancies):
    """``vacancies`` annotated with ``active_offer_id`` (for dispatch's first read: one statement, not two)."""
    return vacancies.annotate(active_offer_id=Subquery(active_offers(OuterRef("pk")).values("pk")[:1]))


def _fence_queryset(vacancy_id: int):
    """The fence's statement (``fenced``): the vacancy locked, with its parents, its active offer, the clinic's
    newest policy and whether a shadow policy is published."""
    newest_policy = WaitlistPolicy.objects.filter(clinic_id=OuterRef("clinic_id")).order_by("-version")
    shadow = ShadowPolicy.objects.filter(clinic_id=OuterRef("clinic_id"), status=ShadowStatus.SHADOW)
    return (
        with_active_offer(Vacancy.objects.select_for_update(of=("self",), no_key=True))
        .select_related("clinic", "tenant_group", "resource")
        .annotate(
            policy_id_now=Subquery(newest_policy.values("pk")[:1]),
            has_shadow=Exists(shadow),
        )
        .filter(pk=vacancy_id)
    )


#: Compiled once per process, prepared once per connection (issue 15): the same statement, without compiling
#: or planning it per promotion.
_FENCE: PreparedQuery[Vacancy] = PreparedQuery(_fence_queryset, int)


def fenced(vacancy: Vacancy, now: datetime) -> tuple[Vacancy, DispatchResult | None]:
    """Lock the vacancy (the fence: promoters of one vacancy queue here) and say whether it is still open
    for an offer: ALREADY_OFFERED (one landed meanwhile) or CLOSED (closed or started) when not.

    One statement locks the row and reads its active offer, the clinic's newest policy and whether a shadow
    policy is published. Those reads see the statement's snapshot, taken before any wait for the lock; the
    locked row itself is the newest. Every promotion bumps the vacancy's version, so a version other than
    the one ``vacancy`` was read at means an offer may have landed while this waited: then the active offer
    and the policy are read again, after the lock.
    """
    locked = _FENCE.first(vacancy.pk)
    if locked is None:
        raise Vacancy.DoesNotExist("Vacancy matching query does not exist.")
    if locked.version != vacancy.version:
        active = active_offer(locked.pk)
        locked.active_offer_id = active.pk if active else None
        locked.policy_id_now = WaitlistPolicy.objects.filter(clinic_id=locked.clinic_id).order_by(
            "-version").values_list("pk", flat=True).first()
    if locked.active_offer_id is not None:
        return locked, DispatchResult("ALREADY_OFFERED", Offer.objects.get(pk=locked.active_offer_id))
    if locked.status not in DISPATCHABLE_VACANCY_STATUSES or locked.starts_at <= now:
        return locked, DispatchResult("CLOSED")
    return locked, None


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
    #: What dispatch read once before matching (``context.DispatchContext``), so promotion does not ask again:
    #: the contact cap's statement parameters (``common.notify.contact_cap_params``) and the vacancy's slot
    #: (``effects.slot_of``). None: computed here (staff review's PROMOTE, a late accept).
    cap_params: dict | None = None
    slot: dict | None = None


Run = list[tuple[matcher.Candidate, Decision | None]]


@dataclass(frozen=True)
class UnderFence:
    """What promotion reads under the fence (``fenced_first_free``): the locked vacancy and, unless ``early`` ends
    the promotion (ALREADY_OFFERED, CLOSED, or RESTART when the clinic's policy is newer than the attempt's), the
    first free entry of the run (None: none free), how many of the run that used up, and its facts."""

    locked: Vacancy
    early: DispatchResult | None = None
    entry: WaitlistEntry | None = None
    used: int = 1
    facts: terms.EntryFacts | None = None


def fenced_first_free(vacancy: Vacancy, run: Run, a: Attempt, *, wait: bool) -> UnderFence:
    """Promotion's read, in the caller's transaction: the fence (``fenced``), the policy check, then the entry lock
    with the decision's facts (``lock_first_free``)."""
    locked, early = fenced(vacancy, a.now)
    if early is not None:
        return UnderFence(locked, early)
    if locked.policy_id_now != a.policy.pk:
        return UnderFence(locked, DispatchResult(RESTART))
    entry, used, facts = lock_first_free(locked, run, a, wait=wait)
    return UnderFence(locked, None, entry, used, facts)


def lock_first_free(locked: Vacancy, run: Run, a: Attempt, *, wait: bool
                    ) -> tuple[WaitlistEntry | None, int, terms.EntryFacts | None]:
    """Lock (after the vacancy: the fixed order) the first entry of ``run`` that is still WAITING at the version
    it was read at and that no other transaction holds (``SKIP LOCKED``), with its patient (read, not locked)
    for the notice: one statement however many racing dispatchers hold the head of the queue. The same statement
    reads what ``terms.offer_terms`` decides on (``EntryFacts``): every hard-eligibility rule's outcome, the
    patient's recent sends (the contact cap, common's SQL function ``cw_recent_sends``), the unanswered streak and
    the standing acceptance's minimum notice.

    ``wait``: one candidate, its lock waited for; the facts are then read in a statement of their own after the
    lock, since the lock statement's snapshot is older than the wait. Returns the entry (None: none free), how many
    of ``run`` that used up, and its facts.
    """
    policy, now = a.policy, a.now
    params: dict[str, Any] = {
        **matcher.page_params(vacancy=locked, policy=policy, now=now),
        **(a.cap_params if a.cap_params is not None else contact_cap_params(policy.contact_cap_per_day, now)),
        "ids": [c.entry_id for c, _d in run], "versions": [c.version for c, _d in run],
        "unanswered_before": NO_OFFER_BEFORE, "unanswered_limit": terms.unanswered_limit(policy),
    }
    row = queries.entry_lock_first_free({**params, "unanswered_limit": 0} if wait else params, wait=wait,
                                        checks=not wait)
    if row is None:
        return None, len(run), None
    width = len(queries.ENTRY_FIELDS)
    entry = WaitlistEntry.from_db(connection.alias, [f.attname for f in queries.ENTRY_FIELDS], row[:width])
    patient = row[width + 3:width + 3 + len(queries.PATIENT_FIELDS)]
    entry.patient = Patient.from_db(connection.alias, list(queries.PATIENT_FIELDS), patient)
    checks, sent, unanswered = queries.entry_rechecks(entry.pk, params) if wait else (row[-1], row[-2], row[width + 2])
    return entry, row[width], terms.EntryFacts(checks=checks, sent=sent, unanswered=unanswered,
                                               standing_min_notice=row[width + 1], patient_ref=entry.patient.ref)


def active_or_exhausted(vacancy: Vacancy, now: datetime, *, mark: bool) -> Offer | None:
    """Under the vacancy lock, when the candidate loop found nobody: the active offer if one landed meanwhile, else
    record (once, with ``mark``) that the list ran out for this vacancy (the "exhausted" fill metric)."""
    with transaction.atomic():
        locked = lock_vacancy(vacancy.pk)
        active = active_offer(locked.pk)
        if active is None and mark and locked.exhausted_at is None and (
            locked.status in DISPATCHABLE_VACANCY_STATUSES
        ):
            # A marker, not a state: no version bump, so in-flight CAS writers are not disturbed.
            Vacancy.objects.filter(pk=locked.pk).update(exhausted_at=now)
    return active
