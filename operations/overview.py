"""The clinic overview's counters: what needs attention and what is live, each with the list it opens.

A fixed number of aggregate queries whatever the clinic's size (counts only, no rows). The
definitions are the action queues' own (``waitlist.dispatch.loop`` for stuck bookings and offers
without a hold), so the numbers agree with the lists they link to.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from common.models import OutboxMessage, OutboxStatus
from reevaluation.models import JobState, QuarantineCase, ReevaluationJob
from scheduling.models import LIVE_HOLD_STATUSES, CapacityHold, Clinic, ContactConsent
from waitlist.dispatch.reads import unoffered_vacancies
from waitlist.dispatch.reconcile_reads import offers_without_active_hold, stuck_accepted_offers
from waitlist.models import OFFER_TOPIC, Offer, OfferStatus, Vacancy, VacancyStatus, WaitlistEntry
from waitlist.selectors import opted_out


@dataclass(frozen=True)
class Counter:
    key: str
    label: str
    value: int
    url: str
    #: True for "needs attention" counters: shown red when above zero.
    attention: bool


def _list_url(clinic: Clinic, kind: str, **params) -> str:
    base = reverse("console:waitlist-list", kwargs={"clinic_ref": clinic.ref, "kind": kind})
    return base + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def _count(queryset, group: str = "clinic"):
    """A row count as a scalar subquery (so many counts share one query)."""
    return Coalesce(Subquery(queryset.order_by().values(group).annotate(n=Count("id")).values("n")[:1]), 0)


def _newest(queryset):
    return Subquery(queryset.order_by("-updated_at").values("updated_at")[:1])


def _one_row(clinic: Clinic, **expressions) -> dict:
    """Evaluate scalar subqueries on the clinic's row (prefixed: names may clash with its relations)."""
    row = Clinic.objects.filter(pk=clinic.pk).values(**{f"x_{k}": v for k, v in expressions.items()}).get()
    return {k[2:]: v for k, v in row.items()}


def clinic_counters(*, clinic: Clinic, now: datetime | None = None) -> list[Counter]:
    """Attention counters first (slots with no candidate, review, stuck bookings, dead deliveries, offers without a
    hold, FAILED jobs, quarantine), then live ones (open vacancies, offers awaiting an answer (OFFERED only: a
    booked offer is not active), live holds, patients waiting who have not opted out, jobs running).
    One query: every count is a scalar subquery on the clinic's row."""
    now = now or timezone.now()
    vacancies = Vacancy.objects.filter(clinic=clinic)
    jobs = ReevaluationJob.objects.filter(clinic_id=clinic.pk)
    n = _one_row(
        clinic,
        review=_count(vacancies.filter(status=VacancyStatus.REVIEW)),
        open=_count(vacancies.filter(status=VacancyStatus.OPEN)),
        active=_count(Offer.objects.filter(clinic=clinic, status=OfferStatus.OFFERED)),
        no_candidate=_count(unoffered_vacancies(clinic=clinic, now=now).filter(exhausted_at__isnull=False,
                                                                              waiting_reason="")),
        stuck=_count(stuck_accepted_offers(now=now).filter(clinic=clinic)),
        broken=_count(offers_without_active_hold().filter(clinic=clinic)),
        dead=_count(
            OutboxMessage.objects.filter(clinic_ref=clinic.ref, topic=OFFER_TOPIC, status=OutboxStatus.DEAD),
            "clinic_ref",
        ),
        holds=_count(CapacityHold.objects.filter(clinic=clinic, status__in=LIVE_HOLD_STATUSES)),
        waiting=_count(WaitlistEntry.objects.filter(clinic=clinic, status="WAITING").alias(out=opted_out())
                       .filter(out=False)),
        failed=_count(jobs.filter(state=JobState.FAILED)),
        running=_count(jobs.filter(state=JobState.RUNNING)),
        quarantine=_count(QuarantineCase.objects.filter(clinic_id=clinic.pk)),
    )
    reeval = reverse("console:reevaluation", kwargs={"clinic_ref": clinic.ref})
    finished = reverse("console:reevaluation-finished", kwargs={"clinic_ref": clinic.ref})
    queue = reverse("console:waitlist", kwargs={"clinic_ref": clinic.ref}) + "#queue-title"
    return [
        Counter("no_candidate", "Slots with no candidate", n["no_candidate"], queue, True),
        Counter("review", "Vacancies in review", n["review"], _list_url(clinic, "vacancies", status="REVIEW"), True),
        Counter("stuck", "Stuck bookings", n["stuck"], queue, True),
        Counter("dead", "Dead deliveries", n["dead"], queue, True),
        Counter("no_hold", "Offers without a hold", n["broken"], queue, True),
        Counter("failed", "Failed jobs", n["failed"], finished + "?status=FAILED", True),
        Counter("quarantine", "Quarantine cases", n["quarantine"], reeval + "#quarantine-title", True),
        Counter("open", "Open vacancies", n["open"], _list_url(clinic, "vacancies", status="OPEN"), False),
        Counter("offers", "Offers awaiting an answer", n["active"], _list_url(clinic, "offers", status="OFFERED"),
                False),
        Counter("holds", "Live holds", n["holds"], _list_url(clinic, "offers", status="ACTIVE"), False),
        Counter("waiting", "Patients waiting (not opted out)", n["waiting"],
                _list_url(clinic, "entries", status="WAITING"), False),
        Counter("running", "Jobs running", n["running"], reeval, False),
    ]


def console_version(*, clinic: Clinic, now: datetime | None = None) -> str:
    """A cheap version of everything the lists and counters show, in one query: the newest change of
    vacancies, offers, entries and jobs, and the counts of rows that appear without an update (quarantine
    cases, dead deliveries), plus the minute (stuck bookings become stuck by time alone).
    Polls answer 304 while it is unchanged."""
    now = now or timezone.now()
    latest = _one_row(
        clinic,
        vacancies=_newest(Vacancy.objects.filter(clinic=clinic)),
        vacancy_count=_count(Vacancy.objects.filter(clinic=clinic)),
        offers=_newest(Offer.objects.filter(clinic=clinic)),
        entries=_newest(WaitlistEntry.objects.filter(clinic=clinic)),
        jobs=_newest(ReevaluationJob.objects.filter(clinic_id=clinic.pk)),
        quarantine=_count(QuarantineCase.objects.filter(clinic_id=clinic.pk)),
        dead=_count(OutboxMessage.objects.filter(clinic_ref=clinic.ref, status=OutboxStatus.DEAD), "clinic_ref"),
        consents=Subquery(ContactConsent.objects.filter(clinic=clinic).order_by("-id").values("id")[:1]),
    )
    return "|".join(f"{k}={v}" for k, v in sorted(latest.items())) + f"|{now:%Y%m%d%H%M}"
