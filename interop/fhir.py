"""A read-only FHIR R4 view of a clinic's schedule: ``Slot`` and ``Appointment`` (docs/fhir.md).

Built with ``fhir.resources`` (its R4B package: Slot and Appointment are unchanged from R4), so every
resource is validated as it is made. Identity: refs only. A patient is ``Patient/<opaque ref>`` and
nothing else (no name, contact or birth date); practitioners and rooms are references too.

FHIR ids allow ``[A-Za-z0-9.-]``; our refs use ``_``, so an id is the ref with ``_`` → ``.``.
Searches are keyset-paged on (start, ref) and bounded by a time window, never OFFSET.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Collate
from django.utils import timezone
from fhir.resources.R4B.appointment import Appointment as FhirAppointment
from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.slot import Slot as FhirSlot

from common.bounds import is_searchable_instant
from common.errors import NotFound, ValidationFailed
from scheduling.models import (
    CAPACITY_STATUSES,
    LIVE_HOLD_STATUSES,
    Appointment,
    AppointmentStatus,
    CapacityHold,
    Clinic,
)
from waitlist.models import ACTIVE_OFFER_STATUSES, DISPATCHABLE_VACANCY_STATUSES, Offer, Vacancy

APPOINTMENT_STATUS = {
    AppointmentStatus.PROPOSED: "proposed",
    AppointmentStatus.HELD: "pending",
    AppointmentStatus.CONFIRMED: "booked",
    AppointmentStatus.CANCELLED: "cancelled",
}
#: The patient's participation, as the appointment's state implies it.
PATIENT_PARTICIPATION = {
    AppointmentStatus.PROPOSED: "needs-action",
    AppointmentStatus.HELD: "tentative",
    AppointmentStatus.CONFIRMED: "accepted",
    AppointmentStatus.CANCELLED: "declined",
}
MAX_WINDOW = timedelta(days=31)
DEFAULT_WINDOW = timedelta(days=7)
MAX_COUNT = 200


def fhir_id(ref: str) -> str:
    return ref.replace("_", ".")


def ref_of(resource_id: str) -> str:
    return resource_id.replace(".", "_") if isinstance(resource_id, str) else ""


@dataclass(frozen=True)
class Search:
    start: datetime
    end: datetime
    count: int
    after: tuple[datetime, str] | None


def _instant(value: str, field: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.utcoffset() is None:
        raise ValidationFailed("Give an ISO 8601 time with an offset.", fields={field: ["invalid"]})
    if not is_searchable_instant(parsed):  # 9999-12-31T23:59:59-01:00 is past what a window can widen
        raise ValidationFailed("Give a time between 1900 and 2999.", fields={field: ["range"]})
    # In UTC: PostgreSQL refuses an offset beyond ±15:59 (Python allows ±23:59), a DataError (500) in the query.
    return parsed.astimezone(UTC)


def search_params(params, *, now: datetime | None = None) -> Search:
    """``start``/``end`` (ISO 8601 with offset; default now … +7 days, at most 31 days), ``_count``
    (1–200, default 50), ``_after`` (the cursor from a ``next`` link)."""
    now = now or timezone.now()
    start = _instant(params["start"], "start") if params.get("start") else now
    end = _instant(params["end"], "end") if params.get("end") else start + DEFAULT_WINDOW
    if not start < end <= start + MAX_WINDOW:
        raise ValidationFailed("end must be after start and at most 31 days later.", fields={"end": ["range"]})
    try:
        count = int(params.get("_count", 50))
    except (TypeError, ValueError):
        count = 0
    if not 1 <= count <= MAX_COUNT:
        raise ValidationFailed("_count must be between 1 and 200.", fields={"_count": ["range"]})
    after = None
    if params.get("_after"):
        at, _, ref = params["_after"].partition("|")
        after = (_instant(at, "_after"), ref)
    return Search(start=start, end=end, count=count, after=after)


def _page(queryset, search: Search, ref_field: str = "ref"):
    """Rows starting in the window after the cursor, ordered (starts_at, ref in "C" collation)."""
    queryset = queryset.filter(starts_at__gte=search.start, starts_at__lt=search.end).annotate(
        _key=Collate(ref_field, "C")
    )
    if search.after:
        at, ref = search.after
        queryset = queryset.filter(Q(starts_at__gt=at) | Q(starts_at=at, _key__gt=ref))
    return queryset.order_by("starts_at", "_key")[: search.count + 1]


# --- Slot ---

def _slot(row: dict, status: str, clinic: Clinic) -> FhirSlot:
    zone = ZoneInfo(clinic.timezone)
    data = {
        "id": fhir_id(row["ref"]),
        "schedule": {"reference": f"Schedule/{fhir_id(row['practitioner__ref'])}"},
        "status": status,
        "start": timezone.localtime(row["starts_at"], timezone=zone).isoformat(),
        "end": timezone.localtime(row["ends_at"], timezone=zone).isoformat(),
        "serviceType": [{"coding": [{"system": "urn:clinic-waitlist:treatment", "code": row["treatment__ref"]}]}],
    }
    return FhirSlot(**data)


SLOT_FIELDS = ("ref", "starts_at", "ends_at", "practitioner__ref", "treatment__ref")


def _slot_sources(clinic: Clinic):
    """(status, queryset) per kind of slot: open vacancies with no active offer are free, live holds
    busy-tentative, HELD/CONFIRMED appointments busy."""
    active_offer = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)
    return (
        ("free", Vacancy.objects.filter(clinic=clinic, status__in=DISPATCHABLE_VACANCY_STATUSES)
         .exclude(Exists(active_offer))),
        ("busy-tentative", CapacityHold.objects.filter(clinic=clinic, status__in=LIVE_HOLD_STATUSES)),
        ("busy", Appointment.objects.filter(clinic=clinic, status__in=CAPACITY_STATUSES)),
    )


def slot_search(*, clinic: Clinic, search: Search) -> tuple[list[FhirSlot], str | None]:
    """One page of the clinic's slots (three bounded queries, merged in order) and the next cursor."""
    rows = []
    for status, queryset in _slot_sources(clinic):
        rows += [(r, status) for r in _page(queryset, search).values(*SLOT_FIELDS)]
    rows.sort(key=lambda item: (item[0]["starts_at"], item[0]["ref"]))
    return _finish([_slot(r, s, clinic) for r, s in rows], [r for r, _ in rows], search)


def slot_read(*, clinic: Clinic, resource_id: str) -> FhirSlot:
    ref = ref_of(resource_id)
    for status, queryset in _slot_sources(clinic):
        row = queryset.filter(ref=ref).values(*SLOT_FIELDS).first()
        if row is not None:
            return _slot(row, status, clinic)
    raise NotFound()


# --- Appointment ---

APPOINTMENT_FIELDS = (
    "ref", "status", "starts_at", "ends_at", "created_at", "patient__ref", "practitioner__ref", "resource__ref",
    "treatment__ref",
)


def _appointment(row: dict, clinic: Clinic) -> FhirAppointment:
    zone = ZoneInfo(clinic.timezone)
    participants = [
        {"actor": {"reference": f"Patient/{fhir_id(row['patient__ref'])}"},
         "status": PATIENT_PARTICIPATION[row["status"]]},
        {"actor": {"reference": f"Practitioner/{fhir_id(row['practitioner__ref'])}"}, "status": "accepted"},
    ]
    if row["resource__ref"]:
        participants.append({"actor": {"reference": f"Location/{fhir_id(row['resource__ref'])}"},
                             "status": "accepted"})
    data = {
        "id": fhir_id(row["ref"]),
        "status": APPOINTMENT_STATUS[row["status"]],
        "start": timezone.localtime(row["starts_at"], timezone=zone).isoformat(),
        "end": timezone.localtime(row["ends_at"], timezone=zone).isoformat(),
        "created": timezone.localtime(row["created_at"], timezone=zone).isoformat(),
        "serviceType": [{"coding": [{"system": "urn:clinic-waitlist:treatment", "code": row["treatment__ref"]}]}],
        "participant": participants,
    }
    if row["status"] in CAPACITY_STATUSES:
        data["slot"] = [{"reference": f"Slot/{fhir_id(row['ref'])}"}]
    return FhirAppointment(**data)


def appointment_search(*, clinic: Clinic, search: Search) -> tuple[list[FhirAppointment], str | None]:
    rows = list(_page(Appointment.objects.filter(clinic=clinic), search).values(*APPOINTMENT_FIELDS))
    return _finish([_appointment(r, clinic) for r in rows], rows, search)


def appointment_read(*, clinic: Clinic, resource_id: str) -> FhirAppointment:
    row = Appointment.objects.filter(clinic=clinic, ref=ref_of(resource_id)).values(*APPOINTMENT_FIELDS).first()
    if row is None:
        raise NotFound()
    return _appointment(row, clinic)


def _finish(resources: list, rows: list[dict], search: Search):
    """Cut to ``count``; the cursor is the last row's (start, ref) when more rows exist."""
    more = len(resources) > search.count
    resources, rows = resources[: search.count], rows[: search.count]
    cursor = f"{rows[-1]['starts_at'].isoformat()}|{rows[-1]['ref']}" if more and rows else None
    return resources, cursor


def bundle(resources: list, *, base_url: str, self_url: str, next_url: str | None) -> Bundle:
    """A searchset Bundle; ``base_url`` is the clinic's FHIR base (absolute), for each entry's fullUrl."""
    links = [{"relation": "self", "url": self_url}]
    if next_url:
        links.append({"relation": "next", "url": next_url})
    return Bundle(
        type="searchset",
        link=links,
        entry=[{"fullUrl": f"{base_url}{r.get_resource_type()}/{r.id}", "resource": r, "search": {"mode": "match"}}
               for r in resources],
    )
