"""The vacancy fence: every promoter of one vacancy queues on its row lock (``fenced``: promotion's write,
``offer_write.promote_first_free``; staff review; a late accept), the vacancy's active offer, and what dispatch answers
(``DispatchResult``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Subquery

from common.fastpath import PreparedQuery
from waitlist.dispatch import matcher
from waitlist.dispatch.locks import lock_vacancy
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    Offer,
    ShadowPolicy,
    ShadowStatus,
    Vacancy,
    WaitlistPolicy,
)
from waitlist.rules.reachability import Unreachable
from waitlist.rules.terms import RESTART, UNREACHABLE

# ``promote``'s outcomes besides ``DispatchResult``'s own, as the offer's terms name them: RESTART when the facts a
# candidate was chosen on changed (policy, decision: match again), UNREACHABLE when the candidate cannot be reached now
# (contact cap: ``waiting`` says why).
__all__ = ["RESTART", "UNREACHABLE", "DispatchResult", "active_offer", "active_offers", "active_or_exhausted", "fenced",
           "with_active_offer"]


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
