"""The operations Action queue: what needs a person, oldest first, as one keyset-paged list over its sources.

Each source is read with the same ``(at, kind, ref) > after`` bound and ``limit`` in SQL, then the rows are
merged (no N+1). Refs and codes only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.functions import Collate
from django.utils import timezone

from common.models import OutboxMessage, OutboxStatus
from common.timefmt import iso_in_zone
from scheduling.models import Clinic
from waitlist.dispatch.reads import unoffered_vacancies
from waitlist.dispatch.reconcile_reads import offers_without_active_hold, stuck_accepted_offers
from waitlist.figures.kept import kept
from waitlist.figures.metrics import NOTICE_TOPICS, notice_provider_failures, provider_failing_after
from waitlist.models import OFFER_TOPIC, Offer, OfferEvent, Vacancy, VacancyStatus, WaitlistPolicy
from waitlist.reliability.feed import get_decision_provider
from waitlist.texts.queue import failing_texts_rows, unacknowledged_rows


class QueueCursor(NamedTuple):
    """A row's place in the queue's order (also the ``after`` cursor of the next page)."""

    at: datetime
    kind: str
    ref: str

    def encode(self) -> str:
        return f"{self.at.isoformat()}|{self.kind}|{self.ref}"


def cursor_decode(after) -> QueueCursor | None:
    """An ``after`` cursor from a previous page; None (the first page) for anything malformed."""
    if not isinstance(after, str) or len(after) > 200:
        return None
    parts = after.split("|")
    if len(parts) != 3 or parts[1] not in SOURCES:
        return None
    try:
        at = datetime.fromisoformat(parts[0])
    except ValueError:
        return None
    if at.utcoffset() is None:
        return None
    return QueueCursor(at, parts[1], parts[2])


@dataclass(frozen=True)
class QueueRow:
    """One queue row before it is shown: its place, and the refs and codes it carries."""

    at: datetime
    kind: str
    ref: str
    fields: dict = field(default_factory=dict)

    @property
    def key(self) -> QueueCursor:
        return QueueCursor(self.at, self.kind, self.ref)


@dataclass(frozen=True)
class QueuePage:
    """What every source reads with: the clinic, the time, the page size and the cursor."""

    clinic: Clinic
    now: datetime
    limit: int
    position: QueueCursor | None

    def take(self, qs, at_field: str, kind: str, *values: str, ref_field: str = "ref"):
        """The source's first ``limit`` rows after the cursor, as ``values``. The full keyset bound
        ``(at, kind, ref) > after`` is in SQL (a bare ``at >= since`` would return the same first ``limit`` rows
        again when more than ``limit`` rows share the cursor's timestamp). Refs compare in the "C" collation,
        as Python's merge sort does."""
        qs = qs.annotate(_key=Collate(ref_field, "C"))
        if self.position is not None:
            since, cursor_kind, cursor_ref = self.position
            if kind > cursor_kind:
                qs = qs.filter(**{f"{at_field}__gte": since})
            elif kind < cursor_kind:
                qs = qs.filter(**{f"{at_field}__gt": since})
            else:
                qs = qs.filter(Q(**{f"{at_field}__gt": since}) | Q(**{at_field: since, "_key__gt": cursor_ref}))
        return qs.values(*values).order_by(at_field, "_key")[: self.limit]


def _current_policy(clinic: Clinic):
    return WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version")


def _review_rows(page: QueuePage) -> list[QueueRow]:
    """``VACANCY_REVIEW``: a STALE/UNAVAILABLE decision stopped automatic promotion (STAFF_REVIEW)."""
    in_review = Vacancy.objects.filter(clinic=page.clinic, status=VacancyStatus.REVIEW).annotate(
        policy_version=Subquery(_current_policy(page.clinic).values("version")[:1]))
    found = list(page.take(in_review, "updated_at", "VACANCY_REVIEW", "ref", "updated_at", "review_entry__ref",
                           "review_entry__patient_id", "policy_version"))
    decisions = get_decision_provider().decisions_for(
        clinic=page.clinic, patient_ids={v["review_entry__patient_id"] for v in found if v["review_entry__patient_id"]})
    rows = []
    for v in found:
        decision = decisions.get(v["review_entry__patient_id"])
        rows.append(QueueRow(v["updated_at"], "VACANCY_REVIEW", v["ref"], {
            "reason_code": f"DECISION_{decision.status if decision else 'UNAVAILABLE'}", "vacancy": v["ref"],
            "entry": v["review_entry__ref"], "policy_version": v["policy_version"],
            "decision_ref": decision.decision_ref if decision else None}))
    return rows


def _stuck_rows(page: QueuePage) -> list[QueueRow]:
    """``BOOKING_STUCK``: an ACCEPTED hold not booked ``WAITLIST_BOOKING_RETRY_MINUTES`` after the claim."""
    last_code = OfferEvent.objects.filter(
        offer=OuterRef("pk"), reason_code__in=["BOOKING_STUCK", "BOOKING_RETRY_FAILED"]
    ).order_by("-id").values("detail__code")[:1]
    stuck = stuck_accepted_offers(now=page.now).filter(clinic=page.clinic).annotate(last_code=Subquery(last_code))
    return [
        QueueRow(o["updated_at"], "BOOKING_STUCK", o["hold__ref"], {
            "reason_code": o["last_code"] or "NOT_BOOKED", "offer": o["ref"], "hold": o["hold__ref"],
            "vacancy": o["vacancy__ref"], "entry": o["entry__ref"], "policy_version": o["policy_version"],
            "decision_ref": o["decision_ref"]})
        for o in page.take(stuck, "updated_at", "BOOKING_STUCK", "ref", "updated_at", "hold__ref", "vacancy__ref",
                           "entry__ref", "policy_version", "decision_ref", "last_code", ref_field="hold__ref")
    ]


def _dead_delivery_rows(page: QueuePage) -> list[QueueRow]:
    """``DELIVERY_DEAD``: a patient notice (an offer, a booking's confirmation) that reached the attempt bound."""
    offer_facts = Offer.objects.filter(clinic=page.clinic, ref=OuterRef("aggregate_ref"))
    dead = OutboxMessage.objects.filter(
        clinic_ref=page.clinic.ref, topic__in=NOTICE_TOPICS, status=OutboxStatus.DEAD
    ).annotate(
        offer_status=Subquery(offer_facts.values("status")[:1]),
        policy_version=Subquery(offer_facts.values("policy_version")[:1]),
        decision_ref=Subquery(offer_facts.values("decision_ref")[:1]),
    )
    return [
        QueueRow(m["created_at"], "DELIVERY_DEAD", m["ref"], {
            "reason_code": m["last_error_code"] or "DEAD", "notice": m["topic"],
            **({"offer": m["aggregate_ref"]} if m["topic"] == OFFER_TOPIC else {"appointment": m["aggregate_ref"]}),
            "offer_status": m["offer_status"], "attempts": m["attempts"],
            "policy_version": m["policy_version"], "decision_ref": m["decision_ref"]})
        for m in page.take(dead, "created_at", "DELIVERY_DEAD", "ref", "created_at", "aggregate_ref", "topic",
                           "last_error_code", "attempts", "offer_status", "policy_version", "decision_ref")
    ]


def _offer_without_hold_rows(page: QueuePage) -> list[QueueRow]:
    """``OFFER_WITHOUT_HOLD``: an active offer whose hold no longer reserves the slot (reconcile finding)."""
    broken = offers_without_active_hold().filter(clinic=page.clinic)
    return [
        QueueRow(o["created_at"], "OFFER_WITHOUT_HOLD", o["ref"], {
            "reason_code": f"HOLD_{o['hold__status']}", "offer": o["ref"], "offer_status": o["status"],
            "hold": o["hold__ref"], "vacancy": o["vacancy__ref"], "policy_version": o["policy_version"],
            "decision_ref": o["decision_ref"]})
        for o in page.take(broken, "created_at", "OFFER_WITHOUT_HOLD", "ref", "created_at", "status", "hold__ref",
                           "hold__status", "vacancy__ref", "policy_version", "decision_ref")
    ]


def _waiting_lead(clinic: Clinic) -> timedelta:
    """How close to its start a waiting vacancy needs a person: the policy's minimum lead and answer margin."""
    minutes = _current_policy(clinic).values_list("min_lead_minutes", "answer_window_margin_minutes").first()
    return timedelta(minutes=sum(int(v or 0) for v in minutes or (0, 0)))


_UNOFFERED_FIELDS = ("ref", "starts_at", "waiting_reason", "waiting_until", "exhausted_at", "updated_at")


def _no_candidate_rows(page: QueuePage) -> list[QueueRow]:
    """``VACANCY_NO_CANDIDATE``: an open vacancy, not started, whose candidate list ran out (since ``exhausted_at``)."""
    tz = page.clinic.timezone
    empty = unoffered_vacancies(clinic=page.clinic, now=page.now).filter(exhausted_at__isnull=False, waiting_reason="")
    return [
        QueueRow(v["exhausted_at"], "VACANCY_NO_CANDIDATE", v["ref"], {
            "reason_code": "NO_CANDIDATE", "vacancy": v["ref"], "starts_at": iso_in_zone(v["starts_at"], tz)})
        for v in page.take(empty, "exhausted_at", "VACANCY_NO_CANDIDATE", *_UNOFFERED_FIELDS)
    ]


def _waiting_rows(page: QueuePage) -> list[QueueRow]:
    """``VACANCY_WAITING``: an open vacancy held back (quiet hours, contact caps) until too close to its start."""
    tz = page.clinic.timezone
    late = Q(waiting_until__isnull=True) | Q(waiting_until__gte=F("starts_at") - _waiting_lead(page.clinic))
    waiting = unoffered_vacancies(clinic=page.clinic, now=page.now).exclude(waiting_reason="").filter(late)
    return [
        QueueRow(v["updated_at"], "VACANCY_WAITING", v["ref"], {
            "reason_code": v["waiting_reason"], "vacancy": v["ref"], "starts_at": iso_in_zone(v["starts_at"], tz),
            "until": iso_in_zone(v["waiting_until"], tz) if v["waiting_until"] else None})
        for v in page.take(waiting, "updated_at", "VACANCY_WAITING", *_UNOFFERED_FIELDS)
    ]


def _provider_rows(page: QueuePage) -> list[QueueRow]:
    """``PROVIDER_FAILING``: the clinic's notice provider (console, email, webhook) failed its last
    ``provider_failing_after()`` attempts with no notice sent since; since the first failure of the streak."""
    streak = kept("provider-failures", page.clinic, lambda: notice_provider_failures(clinic=page.clinic))
    if streak["failures"] < provider_failing_after():
        return []
    return [QueueRow(streak["since"], "PROVIDER_FAILING", streak["provider"], {
        "reason_code": streak["code"] or "FAILED", "attempts": streak["failures"],
        "last_sent_at": iso_in_zone(streak["last_sent"], page.clinic.timezone) if streak["last_sent"] else None})]


Source = Callable[[QueuePage], list[QueueRow]]

#: The queue's sources, one per kind: adding a kind is adding a source here, or, for an app above the waitlist
#: (interop's failing subscriptions), registering it from that app's ``ready()`` (``queue_source_register``).
SOURCES: dict[str, Source] = {
    "VACANCY_REVIEW": _review_rows,
    "BOOKING_STUCK": _stuck_rows,
    "DELIVERY_DEAD": _dead_delivery_rows,
    "OFFER_WITHOUT_HOLD": _offer_without_hold_rows,
    "VACANCY_NO_CANDIDATE": _no_candidate_rows,
    "VACANCY_WAITING": _waiting_rows,
    "PROVIDER_FAILING": _provider_rows,
    "BOOKING_UNACKNOWLEDGED": unacknowledged_rows,
    "TEXTS_FAILING": failing_texts_rows,
}


def queue_source_register(kind: str, source: Source) -> None:
    """Add another app's source of queue rows (once per process, at its app's ``ready()``)."""
    SOURCES[kind] = source


def ops_action_queue(
    *, clinic: Clinic, limit: int = 50, after: str | None = None, now: datetime | None = None
) -> dict:
    """What needs a person, oldest first, as one keyset-paged list over the ``SOURCES`` (each row's kind is
    documented on its source). Each row: ``kind``, ``ref`` (the row to act on), ``at``, ``reason_code``, related
    refs, ``policy_version`` and ``decision_ref``. Refs and codes only. ``next`` is the cursor of the next page.
    """
    position = cursor_decode(after)
    page = QueuePage(clinic, now or timezone.now(), max(1, min(int(limit), 200)), position)
    rows = sorted((row for source in SOURCES.values() for row in source(page)), key=lambda r: r.key)
    following = [r for r in rows if position is None or r.key > position]
    shown = following[: page.limit]
    items = [{"at": iso_in_zone(r.at, clinic.timezone), "kind": r.kind, "ref": r.ref, **r.fields} for r in shown]
    next_cursor = None
    if shown and (len(following) > page.limit or len(shown) == page.limit):
        last = shown[-1]
        next_cursor = QueueCursor(datetime.fromisoformat(items[-1]["at"]), last.kind, last.ref).encode()
    return {"items": items, "next": next_cursor}
