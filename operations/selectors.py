"""Console reads. Every clinic-scoped read takes a ``clinic`` already resolved by ``clinic_for_user``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.db.models import Q, Subquery

from common.models import AuditEntry
from common.pagination import day_bounds
from scheduling.models import Clinic
from scheduling.scoping import clinics_for_user
from waitlist.figures.fairness import shadow_summary
from waitlist.models import Offer, OfferStatus
from waitlist.shadow.models import ShadowPolicy, ShadowStatus


def console_clinics(*, user) -> list[Clinic]:
    """The clinics the user works at (any role), for the switcher: one query."""
    return list(clinics_for_user(user).select_related(None).order_by("name", "id").only("ref", "name"))


def console_first_clinic(*, user) -> Clinic | None:
    return clinics_for_user(user).select_related(None).order_by("name", "id").only("ref").first()


@dataclass(frozen=True)
class AuditPage:
    entries: list[AuditEntry]
    #: The ref of the last entry shown when older entries exist; the "load more" cursor.
    next_cursor: str | None


AUDIT_COLUMNS = (
    "ref",
    "actor_label",
    "action",
    "clinic_ref",
    "target_ref",
    "reason",
    "idempotency_key",
    "correlation_id",
    "result",
    "created_at",
)


#: Audit actions that change nothing (a preview precedes the change it shows); listed apart.
PREVIEW_ACTION_SUFFIX = "_preview"


def audit_entries_page(
    *, clinic: Clinic, limit: int, action: str = "", after: str = "", actor: str = "",
    date_from: date | None = None, date_to: date | None = None, kind: str = "",
) -> AuditPage:
    """One page of the clinic's audit entries, newest first, in exactly one query.

    Keyset pagination on (created_at, id) — never OFFSET — so page N costs what page 1 costs.
    ``after`` is the ref of the last entry already shown; it is resolved inside the same query
    (a subquery limited to this clinic, so a foreign ref just yields an empty page). The
    redundant ``created_at <= cursor`` bound lets PostgreSQL range-scan the
    ``audit_clinic_recent`` index (clinic_ref, -created_at, -id) instead of walking it from the top;
    the OR only settles ties on the boundary timestamp.
    """
    entries = AuditEntry.objects.filter(clinic_ref=clinic.ref)
    if action:
        entries = entries.filter(action__icontains=action)
    if actor:
        entries = entries.filter(actor_label__icontains=actor)
    if date_from:
        entries = entries.filter(created_at__gte=day_bounds(date_from, clinic.timezone)[0])
    if date_to:
        entries = entries.filter(created_at__lt=day_bounds(date_to, clinic.timezone)[1])
    if kind == "previews":
        entries = entries.filter(action__endswith=PREVIEW_ACTION_SUFFIX)
    elif kind == "changes":
        entries = entries.exclude(action__endswith=PREVIEW_ACTION_SUFFIX)
    if after:
        cursor = AuditEntry.objects.filter(clinic_ref=clinic.ref, ref=after)
        cursor_at = Subquery(cursor.values("created_at")[:1])
        cursor_id = Subquery(cursor.values("id")[:1])
        entries = entries.filter(created_at__lte=cursor_at).filter(
            Q(created_at__lt=cursor_at) | Q(created_at=cursor_at, id__lt=cursor_id)
        )
    rows = list(entries.order_by("-created_at", "-id").only(*AUDIT_COLUMNS)[: limit + 1])
    has_more = len(rows) > limit
    rows = rows[:limit]
    return AuditPage(entries=rows, next_cursor=rows[-1].ref if has_more and rows else None)


def shadow_decision(*, clinic: Clinic, policy_fields: dict) -> dict | None:
    """The clinic's latest shadow policy for the controls page: its agreement and, while it is observed,
    the preview of a promote: each field whose shadow value differs from the enforced ``policy_fields``
    (a promote publishes the shadow's values as they are, so a change made since it was published would
    be undone: the rows say so). Four queries; None without a shadow."""
    summary = shadow_summary(clinic=clinic, differences=0)
    if summary is None:
        return None
    rows = []
    if summary["status"] == ShadowStatus.SHADOW:
        fields = ShadowPolicy.objects.filter(clinic=clinic, ref=summary["ref"]).values_list("fields", flat=True)[0]
        for name, enforced in policy_fields.items():
            shadow = fields.get(name, enforced)
            if str(shadow) != str(enforced):
                rows.append({"name": name, "enforced": "—" if enforced is None else enforced,
                             "shadow": "—" if shadow is None else shadow, "changed": name in summary["changes"]})
    return {**summary, "decidable": summary["status"] == ShadowStatus.SHADOW, "preview": rows}


def offers_in_flight(*, clinic: Clinic, limit: int = 20) -> list[dict]:
    """Offers waiting for the patient's answer, soonest expiry first (refs, states and times only)."""
    return [dict(row) for row in
        Offer.objects.filter(clinic=clinic, status=OfferStatus.OFFERED)
        .order_by("expires_at", "id")
        .values("ref", "code", "expires_at", "notified_at", "vacancy__ref", "vacancy__starts_at",
                "vacancy__practitioner__name", "vacancy__treatment__name")[:limit]]
