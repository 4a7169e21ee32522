"""The waitlist's pages and details for the API (and the console's lists): entries, vacancies, offers."""

from __future__ import annotations

from datetime import date

from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, OuterRef, Q, Subquery

from common.pagination import KeysetPage, day_bounds, keyset_page
from scheduling.models import Clinic, ConsentState, ContactConsent
from scheduling.scoping import scoped_get
from waitlist.models import ACTIVE_OFFER_STATUSES, Offer, Vacancy, WaitlistEntry


def entry_detail(*, clinic: Clinic, ref: str) -> WaitlistEntry:
    return scoped_get(
        WaitlistEntry.objects.select_related("patient", "treatment", "practitioner"), clinic, ref
    )


def standing_current(*, entry: WaitlistEntry):
    """The entry's newest standing-acceptance row (GRANTED or REVOKED), or None: never recorded."""
    return entry.standing.order_by("-id").first()


def _list_filters(queryset, *, clinic: Clinic, status=None, practitioner=None, treatment=None, day=None,
                  prefix: str = "", day_field: str = "starts_at"):
    """The console/API list filters, shared by vacancies, offers (through ``vacancy__``) and entries."""
    if status:
        queryset = queryset.filter(status=status)
    if practitioner:
        queryset = queryset.filter(**{f"{prefix}practitioner__ref": practitioner})
    if treatment:
        queryset = queryset.filter(**{f"{prefix}treatment__ref": treatment})
    if day:
        start, end = day_bounds(day, clinic.timezone)
        if day_field == "window":  # an entry's window covers part of the day
            queryset = queryset.filter(earliest__lt=end, latest__gt=start)
        else:
            queryset = queryset.filter(**{f"{prefix}{day_field}__gte": start, f"{prefix}{day_field}__lt": end})
    return queryset


def opted_out(patient_field: str = "patient_id"):
    """True when the patient withdrew contact consent (the opt-out link or staff): consent rows exist and no
    channel's newest row is GRANTED. A patient who never consented is not "opted out"."""
    rows = ContactConsent.objects.filter(patient_id=OuterRef(patient_field))
    newer = ContactConsent.objects.filter(patient_id=OuterRef("patient_id"), channel=OuterRef("channel"),
                                          id__gt=OuterRef("id"))
    granted = rows.filter(state=ConsentState.GRANTED).exclude(Exists(newer))
    return ExpressionWrapper(Q(Exists(rows)) & ~Q(Exists(granted)), output_field=BooleanField())


def entry_page(
    *, clinic: Clinic, limit: int, after: str = "", status: str | None = None, day: date | None = None,
    practitioner: str | None = None, treatment: str | None = None,
) -> KeysetPage:
    """The clinic's waitlist entries, longest waiting first; ``day`` keeps entries whose window
    covers part of that local day. One query (keyset on ``waiting_since``, ``id``)."""
    queryset = WaitlistEntry.objects.filter(clinic=clinic).select_related("patient", "treatment", "practitioner")
    queryset = _list_filters(queryset, clinic=clinic, status=status, practitioner=practitioner,
                             treatment=treatment, day=day, day_field="window").annotate(opted_out=opted_out())
    return keyset_page(queryset, field="waiting_since", limit=limit, after=after)


def vacancy_page(
    *, clinic: Clinic, limit: int, after: str = "", status: str | None = None, day: date | None = None,
    practitioner: str | None = None, treatment: str | None = None,
) -> KeysetPage:
    """The clinic's vacancies, newest first, each with its active offer's ref and expiry. One query."""
    active = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES).order_by("-id")
    queryset = (
        Vacancy.objects.filter(clinic=clinic)
        .select_related("practitioner", "treatment")
        .annotate(
            active_offer_ref=Subquery(active.values("ref")[:1]),
            active_offer_expires_at=Subquery(active.values("expires_at")[:1]),
            active_offer_status=Subquery(active.values("status")[:1]),
            offer_count=Subquery(
                Offer.objects.filter(vacancy=OuterRef("pk")).order_by().values("vacancy")
                .annotate(n=Count("id")).values("n")[:1]
            ),
        )
    )
    queryset = _list_filters(queryset, clinic=clinic, status=status, practitioner=practitioner,
                             treatment=treatment, day=day)
    return keyset_page(queryset, field="created_at", limit=limit, after=after, descending=True)


#: The offer list's pseudo-state: OFFERED or ACCEPTED (live, with a countdown to expiry).
ACTIVE_OFFERS = "ACTIVE"


def offer_page(
    *, clinic: Clinic, limit: int, after: str = "", status: str | None = None, day: date | None = None,
    practitioner: str | None = None, treatment: str | None = None,
) -> KeysetPage:
    """The clinic's offers, newest first, with their vacancy's slot, practitioner and treatment. One query."""
    queryset = Offer.objects.filter(clinic=clinic).select_related(
        "vacancy__practitioner", "vacancy__treatment", "entry", "hold"
    )
    if status == ACTIVE_OFFERS:
        queryset, status = queryset.filter(status__in=ACTIVE_OFFER_STATUSES), None
    queryset = _list_filters(queryset, clinic=clinic, status=status, practitioner=practitioner,
                             treatment=treatment, day=day, prefix="vacancy__")
    return keyset_page(queryset, field="created_at", limit=limit, after=after, descending=True)


def vacancies_by_ref(*, clinic: Clinic, refs: list[str]) -> dict[str, Vacancy]:
    """The clinic's vacancies among ``refs`` (one query; foreign and unknown refs are simply absent)."""
    rows = Vacancy.objects.filter(clinic=clinic, ref__in=refs).select_related(
        "practitioner", "treatment", "review_entry"
    )
    return {v.ref: v for v in rows}


def vacancy_detail(*, clinic: Clinic, ref: str) -> tuple[Vacancy, Offer | None]:
    vacancy = scoped_get(Vacancy.objects.select_related("practitioner", "treatment", "resource"), clinic, ref)
    active = vacancy.offers.filter(status__in=ACTIVE_OFFER_STATUSES).only("ref").first()
    return vacancy, active


def offer_detail(*, clinic: Clinic, ref: str) -> Offer:
    return scoped_get(Offer.objects.select_related("vacancy", "entry", "hold__appointment", "renews"), clinic, ref)
