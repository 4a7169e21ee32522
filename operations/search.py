"""Find one object by its ref in the user's clinics (the console's search box). Reads only.

A ref's prefix names its table, so a search costs one indexed query (the unique ref index, limited
to the user's clinics by a subquery). An unknown ref, a malformed one and another tenant's ref
all come back as ``None``: the caller cannot tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Model, QuerySet
from django.urls import reverse

from common.models import AuditEntry
from common.shortcodes import clinic_prefix, parse_code
from reevaluation.models import QuarantineCase, ReevaluationJob
from scheduling.models import Appointment, CapacityHold, Clinic
from scheduling.scoping import clinics_for_user
from waitlist.models import Offer, Vacancy, WaitlistEntry

MAX_QUERY = 40


@dataclass(frozen=True)
class Kind:
    label: str
    model: type[Model]
    #: Values read besides the clinic ref (refs, states, codes, times: never patient data).
    fields: tuple[str, ...]


KINDS: dict[str, Kind] = {
    "vac": Kind("vacancy", Vacancy, ("status", "starts_at", "practitioner__name", "treatment__name")),
    "off": Kind("offer", Offer, ("code", "status", "expires_at", "vacancy__ref", "entry__ref", "hold__ref")),
    "hld": Kind("hold", CapacityHold, ("status", "starts_at", "expires_at", "offer__vacancy__ref",
                                       "appointment__ref", "practitioner__name", "treatment__name")),
    "wle": Kind("waitlist entry", WaitlistEntry, ("status", "earliest", "latest", "waiting_since",
                                                  "priority_rank", "treatment__name", "practitioner__name")),
    "apt": Kind("appointment", Appointment, ("code", "status", "starts_at", "ends_at", "practitioner__name",
                                             "treatment__name", "cancel_reason", "cancel_reason_code", "cancelled_by",
                                             "source_hold__ref",
                                             "source_hold__offer__ref", "source_hold__offer__vacancy__ref",
                                             "ehr_identifiers__system", "ehr_identifiers__value")),
    "rjb": Kind("reevaluation job", ReevaluationJob, ("state", "revision", "due_at", "last_failure_code")),
    "rqc": Kind("quarantine case", QuarantineCase, ("reason_code", "category", "source", "created_at",
                                                    "job__ref")),
    "aud": Kind("audit row", AuditEntry, ("action", "actor_label", "target_ref", "created_at", "reason")),
}


@dataclass
class RefHit:
    kind: str
    label: str
    ref: str
    clinic_ref: str
    values: dict = field(default_factory=dict)
    #: Where the ref opens: its own panel when it has one, else the ref page.
    url: str = ""


def _prefix(query: str) -> str:
    return query.split("_", 1)[0] if "_" in query else ""


def find_ref(*, user, query: str) -> RefHit | None:
    """The object named by ``query`` in one of the user's clinics, or ``None`` (unknown or foreign)."""
    query = (query or "").strip().rstrip("…").rstrip(".")
    kind = KINDS.get(_prefix(query))
    if kind is None and "_" not in query and len(query) <= MAX_QUERY:
        return find_code(user=user, query=query)
    if kind is None or len(query) > MAX_QUERY:
        return None
    clinics = clinics_for_user(user).select_related(None).order_by()
    if kind.model is AuditEntry:
        rows: QuerySet[Any] = AuditEntry.objects.filter(ref=query, clinic_ref__in=clinics.values("ref"))
        clinic_field = "clinic_ref"
    else:
        rows = kind.model._default_manager.filter(ref=query, clinic__in=clinics.values("pk"))
        clinic_field = "clinic__ref"
    values = rows.values(clinic_field, "ref", *kind.fields).first()
    if values is None:
        values = _by_prefix(kind, query, clinics, clinic_field)
    if values is None:
        return None
    hit = RefHit(_prefix(query), kind.label, values.pop("ref"), values.pop(clinic_field), values)
    hit.url = _url(hit)
    return hit


#: The kinds a short code names (``common.shortcodes``): appointments and offers.
CODE_KINDS = ("apt", "off")


def find_code(*, user, query: str) -> RefHit | None:
    """The appointment or offer a short code (``GN-7KQ3``, or its random part alone) names in the user's clinics;
    ``None`` when none does, or when several do (the same part in two clinics or two kinds, and no prefix tells
    them apart). Codes and refs only: a name or a phone number never matches."""
    parsed = parse_code(query)
    if parsed is None:
        return None
    prefix, part = parsed
    clinics = {c.pk: c for c in clinics_for_user(user).select_related(None).only("ref", "name", "settings")}
    found: list[RefHit] = []
    for key in CODE_KINDS:
        kind = KINDS[key]
        rows = kind.model._default_manager.filter(code=part, clinic__in=list(clinics)).values(
            "clinic_id", "clinic__ref", "ref", *kind.fields)[:3]
        for values in rows:
            clinic = clinics[values.pop("clinic_id")]
            if prefix and clinic_prefix(clinic) != prefix:
                continue
            found.append(RefHit(key, kind.label, values.pop("ref"), values.pop("clinic__ref"), values))
    if len(found) != 1:
        return None
    hit = found[0]
    hit.url = _url(hit)
    return hit


#: A prefix search needs this many characters after the type prefix (``vac_`` + 4): fewer match too much.
MIN_PREFIX_CHARS = 4


def _by_prefix(kind: Kind, query: str, clinics, clinic_field: str) -> dict | None:
    """The one ref in the user's clinics that starts with ``query`` (the short ref the lists show, or any
    longer start of it); ``None`` when none or several match (an index range scan on the unique ref)."""
    if len(query.split("_", 1)[1]) < MIN_PREFIX_CHARS:
        return None
    if kind.model is AuditEntry:
        rows: QuerySet[Any] = AuditEntry.objects.filter(clinic_ref__in=clinics.values("ref"))
    else:
        rows = kind.model._default_manager.filter(clinic__in=clinics.values("pk"))
    found = list(rows.filter(ref__startswith=query).values(clinic_field, "ref", *kind.fields)[:2])
    return found[0] if len(found) == 1 else None


def ref_in_clinic(*, clinic: Clinic, user, ref: str) -> RefHit | None:
    """``find_ref`` limited to one (already scoped) clinic, for the ref page."""
    hit = find_ref(user=user, query=ref)
    return hit if hit is not None and hit.clinic_ref == clinic.ref else None


def _url(hit: RefHit) -> str:
    clinic_ref, values = hit.clinic_ref, hit.values
    vacancy_ref = {"vac": hit.ref, "off": values.get("vacancy__ref"), "hld": values.get("offer__vacancy__ref")}.get(
        hit.kind
    )
    if vacancy_ref:
        return reverse("console:waitlist-vacancy", kwargs={"clinic_ref": clinic_ref, "vacancy_ref": vacancy_ref})
    if hit.kind == "rjb":
        return reverse("console:reevaluation-job", kwargs={"clinic_ref": clinic_ref, "job_ref": hit.ref})
    return reverse("console:ref", kwargs={"clinic_ref": clinic_ref, "ref": hit.ref})
