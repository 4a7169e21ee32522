"""The FHIR R4 view of a clinic's schedule: ``Slot``, ``Appointment`` and ``Schedule`` (docs/fhir.md).

Built with ``fhir.resources`` (its R4B package: Slot, Appointment, Schedule and Bundle are unchanged from
R4), so every resource is validated as it is made. Identity: refs only. A patient is ``Patient/<opaque
ref>`` and nothing else (no name, contact or birth date); practitioners and rooms are references too.

FHIR ids allow ``[A-Za-z0-9.-]``; our refs use ``_``, so an id is the ref with ``_`` → ``.``.
Searches are keyset-paged on (start, ref) (Schedule: on ref), bounded by ``_count``, never OFFSET.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Collate
from django.utils import timezone
from fhir.resources.R4B.appointment import Appointment as FhirAppointment
from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.schedule import Schedule as FhirSchedule
from fhir.resources.R4B.slot import Slot as FhirSlot

from common.errors import NotFound
from scheduling.models import (
    CAPACITY_STATUSES,
    LIVE_HOLD_STATUSES,
    Appointment,
    AppointmentStatus,
    CapacityHold,
    Clinic,
    Practitioner,
)
from waitlist.models import ACTIVE_OFFER_STATUSES, DISPATCHABLE_VACANCY_STATUSES, Offer, Vacancy, VacancyStatus

from . import search as s
from .models import AppointmentIdentifier

TREATMENT_SYSTEM = "urn:clinic-waitlist:treatment"
#: The code system of ``Appointment.cancelationReason`` (``scheduling.models.CancelReason``).
CANCEL_REASON_SYSTEM = "urn:clinic-waitlist:cancel-reason"
APPOINTMENT_STATUS = {
    AppointmentStatus.PROPOSED: "proposed",
    AppointmentStatus.HELD: "pending",
    AppointmentStatus.CONFIRMED: "booked",
    AppointmentStatus.CANCELLED: "cancelled",
}
OUR_APPOINTMENT_STATUS = {code: ours for ours, code in APPOINTMENT_STATUS.items()}
#: Every R4 Appointment.status code; the ones we never produce match nothing.
APPOINTMENT_CODES = frozenset({"proposed", "pending", "booked", "arrived", "fulfilled", "cancelled", "noshow",
                               "entered-in-error", "checked-in", "waitlist"})
SLOT_CODES = frozenset({"busy", "free", "busy-unavailable", "busy-tentative", "entered-in-error"})
#: The patient's participation, as the appointment's state implies it.
PATIENT_PARTICIPATION = {
    AppointmentStatus.PROPOSED: "needs-action",
    AppointmentStatus.HELD: "tentative",
    AppointmentStatus.CONFIRMED: "accepted",
    AppointmentStatus.CANCELLED: "declined",
}
NOTHING = Q(pk__in=[])
#: Matches every row (an empty ``Q()`` vanishes when OR-ed, so it cannot stand for "all").
EVERYTHING = Q(pk__isnull=False)


def fhir_id(ref: str) -> str:
    return ref.replace("_", ".")


def ref_of(resource_id: str) -> str:
    return resource_id.replace(".", "_") if isinstance(resource_id, str) else ""


def _local(value: datetime, clinic: Clinic) -> str:
    return timezone.localtime(value, timezone=ZoneInfo(clinic.timezone)).isoformat()


def _meta(row: dict, clinic: Clinic) -> dict:
    return {"versionId": str(row["version"]), "lastUpdated": _local(row["updated_at"], clinic)}


def _service_type(treatment_ref: str) -> list[dict]:
    return [{"coding": [{"system": TREATMENT_SYSTEM, "code": treatment_ref}]}]


# --- parameter handlers shared by the resources ---

def _codes_q(values: list[str], *, name: str, valid: Iterable[str], to_q, negate: bool = False) -> Q:
    """A token parameter over a closed code list: an unknown code is a 400, a valid one we never produce
    matches nothing; ``negate`` is the ``:not`` modifier."""
    query = Q()
    valid = frozenset(valid)
    for codes in s.token_values(values, name=name, system=None):
        bad = [c for c in codes if c not in valid]
        if bad:
            raise s.SearchInvalid(f"{name}: unknown code {bad[0]}", fields={name: ["unknown code"]})
        alternatives = NOTHING
        for code in codes:
            alternatives |= to_q(code)
        query &= ~alternatives if negate else alternatives
    return query


def _in_q(groups: list[list[str]], field_name: str) -> Q:
    query = Q()
    for alternatives in groups:
        query &= Q(**{f"{field_name}__in": alternatives})
    return query


def _ids(values: list[str], name: str) -> list[list[str]]:
    return [[ref_of(i) for _, i in group] for group in s.reference_ids(values, name=name, types=())]


def _service_type_q(values: list[str], _zone) -> Q:
    return _in_q(s.token_values(values, name="service-type", system=TREATMENT_SYSTEM), "treatment__ref")


def _reference_q(values: list[str], *, name: str, fields: dict[str, str]) -> Q:
    """A reference parameter; ``fields`` maps each target type to the ref column it names."""
    query = Q()
    for group in s.reference_ids(values, name=name, types=tuple(fields)):
        alternatives = NOTHING
        for kind, ident in group:
            for target in [kind] if kind else list(fields):
                alternatives |= Q(**{f"{fields[target]}": ref_of(ident)})
        query &= alternatives
    return query


def _common() -> dict[str, s.Handler]:
    """``_id`` and ``_lastUpdated`` (the row's ``updated_at``), on every source with a ref and a version."""
    return {
        "_id": lambda values, _zone: _in_q(_ids(values, "_id"), "ref"),
        "_lastUpdated": lambda values, zone: s.date_q(values, name="_lastUpdated", field_name="updated_at",
                                                     zone=zone),
    }


def _keyset(queryset: QuerySet, where: Q, count: int, after: str) -> QuerySet:
    """Rows matching ``where`` after the cursor, ordered (starts_at, ref in "C" collation), one extra."""
    queryset = queryset.filter(where).annotate(_key=Collate("ref", "C"))
    if after:
        at, ref = s.timed_cursor(after)
        queryset = queryset.filter(Q(starts_at__gt=at) | Q(starts_at=at, _key__gt=ref))
    return queryset.order_by("starts_at", "_key")[: count + 1]


def _finish(pairs: list[tuple[dict, object]], count: int) -> tuple[list, str | None]:
    """Cut to ``count``; the cursor is the last row's (start, ref) when more rows exist."""
    more = len(pairs) > count
    pairs = pairs[:count]
    cursor = f"{pairs[-1][0]['starts_at'].isoformat()}|{pairs[-1][0]['ref']}" if more and pairs else None
    return [resource for _, resource in pairs], cursor


# --- Slot ---

SLOT_FIELDS = ("ref", "starts_at", "ends_at", "practitioner__ref", "treatment__ref", "version", "updated_at")


def _slot(row: dict, status: str, clinic: Clinic) -> FhirSlot:
    return FhirSlot.model_validate({
        "id": fhir_id(row["ref"]),
        "meta": _meta(row, clinic),
        "schedule": {"reference": f"Schedule/{fhir_id(row['practitioner__ref'])}"},
        "status": status,
        "start": _local(row["starts_at"], clinic),
        "end": _local(row["ends_at"], clinic),
        "serviceType": _service_type(row["treatment__ref"]),
    })


def _slot_sources(clinic: Clinic) -> tuple[tuple[str, QuerySet], ...]:
    """(status, queryset) per kind of slot: open vacancies with no active offer are free, live holds
    busy-tentative, HELD/CONFIRMED appointments busy."""
    active_offer = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)
    return (
        ("free", Vacancy.objects.filter(clinic=clinic, status__in=DISPATCHABLE_VACANCY_STATUSES)
         .exclude(Exists(active_offer))),
        ("busy-tentative", CapacityHold.objects.filter(clinic=clinic, status__in=LIVE_HOLD_STATUSES)),
        ("busy", Appointment.objects.filter(clinic=clinic, status__in=CAPACITY_STATUSES)),
    )


def slot_handlers(status: str) -> dict[str, s.Handler]:
    """The Slot parameters, as filters on the rows of one source (whose slots all have ``status``)."""
    def status_q(values, _zone, negate=False):
        return _codes_q(values, name="status", valid=SLOT_CODES, negate=negate,
                        to_q=lambda code: EVERYTHING if code == status else NOTHING)

    return {
        **_common(),
        "start": lambda values, zone: s.date_q(values, name="start", field_name="starts_at", zone=zone),
        "status": status_q,
        "status:not": lambda values, zone: status_q(values, zone, negate=True),
        "schedule": lambda values, _zone: _reference_q(values, name="schedule",
                                                       fields={"Schedule": "practitioner__ref"}),
        "service-type": _service_type_q,
    }


#: The names the CapabilityStatement lists (and a search accepts) for Slot.
SLOT_PARAMETERS = tuple(slot_handlers("free"))


def slot_search(*, clinic: Clinic, params, strict: bool) -> tuple[list[FhirSlot], str | None, s.Parsed]:
    """One page of the clinic's slots (three bounded queries, merged in order) and the next cursor."""
    zone = ZoneInfo(clinic.timezone)
    pairs, parsed, total = [], s.Parsed(), 0
    for status, queryset in _slot_sources(clinic):
        parsed = s.parse(params, slot_handlers(status), zone=zone, strict=strict)
        if parsed.count_only:
            total += queryset.filter(parsed.where).count()
            continue
        rows = _keyset(queryset, parsed.where, parsed.count, parsed.after).values(*SLOT_FIELDS)
        pairs += [(row, status) for row in rows]
    if parsed.count_only:
        parsed.total = total
        return [], None, parsed
    pairs.sort(key=lambda item: (item[0]["starts_at"], item[0]["ref"]))
    resources, cursor = _finish([(row, _slot(row, status, clinic)) for row, status in pairs], parsed.count)
    return resources, cursor, parsed


def slot_read(*, clinic: Clinic, resource_id: str) -> FhirSlot:
    ref = ref_of(resource_id)
    for status, queryset in _slot_sources(clinic):
        row = queryset.filter(ref=ref).values(*SLOT_FIELDS).first()
        if row is not None:
            return _slot(row, status, clinic)
    vacancy = vacancy_rows(clinic).filter(ref=ref).first()
    if vacancy is not None:
        return vacancy_slot(clinic, vacancy)[0]
    raise NotFound()


def _vacancy_slot_status(vacancy: dict) -> str:
    """A vacancy's Slot: free while the waitlist looks for a patient, busy-tentative while an offer is out,
    busy once filled, busy-unavailable once closed."""
    if vacancy["status"] in DISPATCHABLE_VACANCY_STATUSES:
        return "busy-tentative" if vacancy["offered"] else "free"
    return "busy" if vacancy["status"] == VacancyStatus.FILLED else "busy-unavailable"


def vacancy_rows(clinic: Clinic):
    active = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)
    return Vacancy.objects.filter(clinic=clinic).annotate(offered=Exists(active)).values(
        *SLOT_FIELDS, "status", "offered", "pk")


def vacancy_slot(clinic: Clinic, row: dict):
    """The Slot of a vacancy in any state (the read view resolves ``Slot/<vacancy id>`` with it too)."""
    status = _vacancy_slot_status(row)
    return _slot(row, status, clinic), status



# --- Appointment ---

APPOINTMENT_FIELDS = (
    "ref", "status", "starts_at", "ends_at", "created_at", "patient__ref", "practitioner__ref", "resource__ref",
    "treatment__ref", "version", "updated_at", "pk", "cancel_reason_code",
)


def _appointment(row: dict, clinic: Clinic, identifiers: Sequence[tuple[str, str]] = ()) -> FhirAppointment:
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
        "meta": _meta(row, clinic),
        "status": APPOINTMENT_STATUS[row["status"]],
        "start": _local(row["starts_at"], clinic),
        "end": _local(row["ends_at"], clinic),
        "created": _local(row["created_at"], clinic),
        "serviceType": _service_type(row["treatment__ref"]),
        "participant": participants,
    }
    if identifiers:
        data["identifier"] = [{"system": system, "value": value} for system, value in identifiers]
    if row["cancel_reason_code"]:
        data["cancelationReason"] = {"coding": [{"system": CANCEL_REASON_SYSTEM, "code": row["cancel_reason_code"]}]}
    if row["status"] in CAPACITY_STATUSES:
        data["slot"] = [{"reference": f"Slot/{fhir_id(row['ref'])}"}]
    return FhirAppointment.model_validate(data)


def _identifier_q(values: list[str], _zone) -> Q:
    query = Q()
    for raw in values:
        alternatives = NOTHING
        for value in s.split_values(raw, "identifier"):
            system, bar, code = value.partition("|")
            if not bar:
                system, code = "", value
            if not code:
                raise s.SearchInvalid("identifier: give system|value or value", fields={"identifier": ["invalid"]})
            match = AppointmentIdentifier.objects.filter(value=code)
            if system:
                match = match.filter(system=system)
            alternatives |= Q(pk__in=match.values("appointment_id"))
        query &= alternatives
    return query


def _appointment_status_q(values, _zone, negate=False) -> Q:
    return _codes_q(values, name="status", valid=APPOINTMENT_CODES, negate=negate,
                    to_q=lambda code: Q(status=OUR_APPOINTMENT_STATUS[code])
                    if code in OUR_APPOINTMENT_STATUS else NOTHING)


APPOINTMENT_HANDLERS: dict[str, s.Handler] = {
    **_common(),
    "date": lambda values, zone: s.date_q(values, name="date", field_name="starts_at", zone=zone),
    "status": _appointment_status_q,
    "status:not": lambda values, zone: _appointment_status_q(values, zone, negate=True),
    "patient": lambda values, _zone: _reference_q(values, name="patient", fields={"Patient": "patient__ref"}),
    "practitioner": lambda values, _zone: _reference_q(values, name="practitioner",
                                                       fields={"Practitioner": "practitioner__ref"}),
    "actor": lambda values, _zone: _reference_q(values, name="actor", fields={
        "Patient": "patient__ref", "Practitioner": "practitioner__ref", "Location": "resource__ref"}),
    "slot": lambda values, _zone: _reference_q(values, name="slot", fields={"Slot": "ref"})
    & Q(status__in=CAPACITY_STATUSES),
    "service-type": _service_type_q,
    "identifier": _identifier_q,
}
APPOINTMENT_PARAMETERS = tuple(APPOINTMENT_HANDLERS)


def _identifiers(pks: list[int]) -> dict[int, list[tuple[str, str]]]:
    found: dict[int, list[tuple[str, str]]] = {}
    for pk, system, value in AppointmentIdentifier.objects.filter(appointment_id__in=pks).values_list(
            "appointment_id", "system", "value"):
        found.setdefault(pk, []).append((system, value))
    return found


def appointments(rows: list[dict], clinic: Clinic) -> list[FhirAppointment]:
    """Map rows (``APPOINTMENT_FIELDS``) with their EHR identifiers (one query for all of them)."""
    identifiers = _identifiers([row["pk"] for row in rows])
    return [_appointment(row, clinic, identifiers.get(row["pk"], [])) for row in rows]


def appointment_search(*, clinic: Clinic, params, strict: bool) -> tuple[list[FhirAppointment], str | None,
                                                                           s.Parsed]:
    parsed = s.parse(params, APPOINTMENT_HANDLERS, zone=ZoneInfo(clinic.timezone), strict=strict)
    if parsed.count_only:
        parsed.total = Appointment.objects.filter(clinic=clinic).filter(parsed.where).count()
        return [], None, parsed
    rows = list(_keyset(Appointment.objects.filter(clinic=clinic), parsed.where, parsed.count, parsed.after)
                .values(*APPOINTMENT_FIELDS))
    resources, cursor = _finish(list(zip(rows, appointments(rows, clinic), strict=True)), parsed.count)
    return resources, cursor, parsed


def appointment_rows(clinic: Clinic) -> QuerySet:
    return Appointment.objects.filter(clinic=clinic).values(*APPOINTMENT_FIELDS)


def appointment_read(*, clinic: Clinic, resource_id: str) -> FhirAppointment:
    row = appointment_rows(clinic).filter(ref=ref_of(resource_id)).first()
    if row is None:
        raise NotFound()
    return appointments([row], clinic)[0]


# --- Schedule (one per practitioner) ---

def _schedule(row: Mapping[str, Any], clinic: Clinic) -> FhirSchedule:
    """A practitioner's schedule. Practitioners carry no version or timestamp, so ``versionId`` is "1"."""
    return FhirSchedule.model_validate({
        "id": fhir_id(row["ref"]),
        "meta": {"versionId": "1"},
        "active": row["active"],
        "actor": [{"reference": f"Practitioner/{fhir_id(row['ref'])}"}],
        "comment": None,
    })


def _active_q(values: list[str], _zone) -> Q:
    query = Q()
    for codes in s.token_values(values, name="active"):
        if any(code not in ("true", "false") for code in codes):
            raise s.SearchInvalid("active: true or false", fields={"active": ["invalid"]})
        query &= Q(active__in=[code == "true" for code in codes])
    return query


SCHEDULE_HANDLERS: dict[str, s.Handler] = {
    "_id": lambda values, _zone: _in_q(_ids(values, "_id"), "ref"),
    "actor": lambda values, _zone: _reference_q(values, name="actor", fields={"Practitioner": "ref"}),
    "active": _active_q,
}
SCHEDULE_PARAMETERS = tuple(SCHEDULE_HANDLERS)


def schedule_search(*, clinic: Clinic, params, strict: bool) -> tuple[list[FhirSchedule], str | None, s.Parsed]:
    parsed = s.parse(params, SCHEDULE_HANDLERS, zone=ZoneInfo(clinic.timezone), strict=strict)
    queryset = Practitioner.objects.filter(clinic=clinic).filter(parsed.where).annotate(_key=Collate("ref", "C"))
    if parsed.count_only:
        parsed.total = queryset.count()
        return [], None, parsed
    if parsed.after:
        queryset = queryset.filter(_key__gt=parsed.after)
    rows = list(queryset.order_by("_key").values("ref", "active")[: parsed.count + 1])
    more = len(rows) > parsed.count
    rows = rows[: parsed.count]
    return [_schedule(r, clinic) for r in rows], (rows[-1]["ref"] if more and rows else None), parsed


def schedule_read(*, clinic: Clinic, resource_id: str) -> FhirSchedule:
    row = Practitioner.objects.filter(clinic=clinic, ref=ref_of(resource_id)).values("ref", "active").first()
    if row is None:
        raise NotFound()
    return _schedule(row, clinic)


def bundle(resources: list, *, base_url: str, self_url: str, next_url: str | None,
           total: int | None = None) -> Bundle:
    """A searchset Bundle; ``base_url`` is the clinic's FHIR base (absolute), for each entry's fullUrl. ``total``:
    the number of matches (given for ``_count=0``, whose Bundle has no entries)."""
    links = [{"relation": "self", "url": self_url}]
    if next_url:
        links.append({"relation": "next", "url": next_url})
    return Bundle.model_validate({
        "type": "searchset",
        "total": total,
        "link": links,
        "entry": [{"fullUrl": f"{base_url}{r.get_resource_type()}/{r.id}", "resource": r, "search": {"mode": "match"}}
               for r in resources],
    })
