"""The rollback readout (issue 28 part 2): the seed's rollback invariants for a clinic, read from state and
history, never assumed.

A rollback stops new mutation; it does not reverse completed work. The readout says whether it holds:

* ``switch``: mutation mode DISABLED (the rollback switch);
* ``drain``: DRAINED with no active lease (expired leases are shown too: ``rescue_leases`` ends them);
* ``confirmed_changed``: CONFIRMED appointments changed by reevaluation since ``since`` (must be 0): an
  applied outcome that claims a change to a CONFIRMED one, an appointment cancelled by reevaluation that no
  PROPOSED/HELD decision and no consented swap explains, a CONFIRMED row rewritten after a reevaluation
  decided about it. A swap the patient chose and an operator confirmed (an APPLIED proposal) is not a change
  *by reevaluation* and is listed apart (``consented_swaps``);
* ``held_lost``: HELD allocations lost outside an atomic replacement: a HELD appointment without an active
  allocation, or an applied HOLD_REPLACED whose replacement holds none. FALLBACK_TO_PROPOSED releases are the
  documented outcome and are counted apart (``held_fallbacks``);
* ``rows``: counts of jobs, outcomes, inbox, quarantine, outbox and audit rows (now, and created since
  ``since``): compare two readouts (``reevaluation_rollback_readout --baseline``) to show nothing was deleted;
* ``jobs``: which jobs finished since ``since`` and which remain (PENDING, RUNNING, RETRY_WAIT), by state.

Refs, states, codes and counts only: no patient data.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings as dj_settings
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from common.models import AuditEntry, OutboxMessage
from reevaluation.models import (
    ACTIVE_JOB_STATES,
    ClinicReevaluationSettings,
    DrainState,
    InboxEvent,
    JobState,
    MutationMode,
    Outcome,
    QuarantineCase,
    ReevaluationJob,
    ReevaluationOutcome,
)
from reevaluation.proposals.models import AppointmentProposal, ProposalState
from scheduling.models import Appointment, AppointmentStatus, CapacityAllocation

#: Refs listed per finding (the counts are always complete).
LIST_LIMIT = 20
#: The default window: the last day.
DEFAULT_SINCE = timedelta(hours=24)
ROW_KINDS = ("jobs", "outcomes", "inbox", "quarantine", "outbox", "audit")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def row_counts(clinic, since: datetime) -> dict:
    """Every reevaluation-owned row of the clinic (and its outbox and audit rows), now and created since."""
    sources = {
        "jobs": (ReevaluationJob.objects.filter(clinic=clinic), "created_at"),
        "outcomes": (ReevaluationOutcome.objects.filter(clinic=clinic), "created_at"),
        "inbox": (InboxEvent.objects.filter(clinic=clinic), "received_at"),
        "quarantine": (QuarantineCase.objects.filter(clinic=clinic), "created_at"),
        "outbox": (
            OutboxMessage.objects.filter(clinic_ref=clinic.ref, topic__startswith="reevaluation."), "created_at"),
        "audit": (AuditEntry.objects.filter(clinic_ref=clinic.ref, action__startswith="reevaluation."), "created_at"),
    }
    counts = {}
    for name, (queryset, column) in sources.items():
        counts[name] = queryset.aggregate(total=Count("pk"), since=Count("pk", filter=Q(**{f"{column}__gte": since})))
    return counts


def _consented_refs(clinic) -> set[str]:
    """Appointments a patient chose to change and (for a CONFIRMED one) an operator confirmed."""
    return set(
        AppointmentProposal.objects.filter(clinic=clinic, state=ProposalState.APPLIED).values_list(
            "appointment_ref", flat=True)
    )


def confirmed_changed(clinic, since: datetime) -> dict:
    consented = _consented_refs(clinic)
    findings: dict[str, str] = {}
    # (a) an applied outcome that claims a change to a CONFIRMED appointment (only a proposal may be applied).
    for ref in (
        ReevaluationOutcome.objects.filter(clinic=clinic, created_at__gte=since, applied=True,
                                           status_before=AppointmentStatus.CONFIRMED)
        .exclude(outcome=Outcome.CONFIRMED_CHANGE_PROPOSED).values_list("appointment_ref", flat=True)
    ):
        findings.setdefault(ref, "APPLIED_OUTCOME_ON_CONFIRMED")
    # (b) cancelled by reevaluation, with no PROPOSED/HELD decision and no consented swap to explain it.
    explained = ReevaluationOutcome.objects.filter(
        clinic=clinic, appointment_ref=OuterRef("ref"), applied=True,
        status_before__in=[AppointmentStatus.PROPOSED, AppointmentStatus.HELD],
    )
    for ref in (
        Appointment.objects.filter(clinic=clinic, status=AppointmentStatus.CANCELLED, updated_at__gte=since,
                                   cancel_reason__startswith="reevaluation:")
        .exclude(ref__in=consented).exclude(Exists(explained)).values_list("ref", flat=True)
    ):
        findings.setdefault(ref, "CANCELLED_BY_REEVALUATION")
    # (c) a CONFIRMED row rewritten after a reevaluation decided about it (CONFIRMED rows are never updated in
    # place by any command: they are only cancelled).
    decided = ReevaluationOutcome.objects.filter(
        clinic=clinic, appointment_ref=OuterRef("ref"), status_before=AppointmentStatus.CONFIRMED,
        created_at__lt=OuterRef("updated_at"),
    )
    for ref in (
        Appointment.objects.filter(clinic=clinic, status=AppointmentStatus.CONFIRMED, updated_at__gte=since)
        .filter(Exists(decided)).values_list("ref", flat=True)
    ):
        findings.setdefault(ref, "CONFIRMED_ROW_REWRITTEN")
    rows = [{"appointment": ref, "finding": code} for ref, code in sorted(findings.items())]
    swaps = list(
        AppointmentProposal.objects.filter(clinic=clinic, state=ProposalState.APPLIED, needs_operator=True,
                                           finished_at__gte=since)
        .order_by("finished_at").values("ref", "appointment_ref", "result_appointment_ref")[:LIST_LIMIT]
    )
    return {
        "count": len(rows),
        "items": rows[:LIST_LIMIT],
        "consented_swaps": [{"proposal": s["ref"], "from": s["appointment_ref"], "to": s["result_appointment_ref"]}
                            for s in swaps],
    }


def held_lost(clinic, since: datetime) -> dict:
    active = CapacityAllocation.objects.filter(appointment_id=OuterRef("pk"), active=True)
    findings: dict[str, str] = {}
    # A HELD appointment reserves capacity: one without an active allocation has lost it.
    for ref in Appointment.objects.filter(clinic=clinic, status=AppointmentStatus.HELD).exclude(
            Exists(active)).values_list("ref", flat=True):
        findings.setdefault(ref, "HELD_WITHOUT_ALLOCATION")
    # An applied HOLD_REPLACED whose replacement does not hold the new time.
    replaced = ReevaluationOutcome.objects.filter(clinic=clinic, created_at__gte=since, applied=True,
                                                  outcome=Outcome.HOLD_REPLACED)
    replacements = dict(replaced.values_list("replacement_ref", "appointment_ref"))
    holding = set(
        Appointment.objects.filter(clinic=clinic, ref__in=list(replacements))
        .filter(Q(status=AppointmentStatus.CANCELLED) | Exists(active)).values_list("ref", flat=True)
    )
    for new_ref, old_ref in sorted(replacements.items()):
        if new_ref not in holding:
            findings.setdefault(old_ref, "REPLACEMENT_WITHOUT_ALLOCATION")
    fallbacks = ReevaluationOutcome.objects.filter(clinic=clinic, created_at__gte=since, applied=True,
                                                   outcome=Outcome.FALLBACK_TO_PROPOSED).count()
    rows = [{"appointment": ref, "finding": code} for ref, code in sorted(findings.items())]
    return {"count": len(rows), "items": rows[:LIST_LIMIT], "held_fallbacks": fallbacks}


def job_progress(clinic, since: datetime) -> dict:
    jobs = ReevaluationJob.objects.filter(clinic=clinic)
    by_state = dict(jobs.values_list("state").annotate(n=Count("pk")).values_list("state", "n"))
    finished = jobs.filter(finished_at__gte=since)
    remaining = jobs.filter(state__in=ACTIVE_JOB_STATES).order_by("priority", "due_at", "pk")
    return {
        "by_state": {state: by_state.get(state, 0) for state in JobState.values},
        "finished_since": dict(finished.values_list("state").annotate(n=Count("pk")).values_list("state", "n")),
        "remaining": remaining.count(),
        "remaining_jobs": [{"job": ref, "state": state, "revision": rev}
                           for ref, state, rev in remaining.values_list("ref", "state", "revision")[:LIST_LIMIT]],
    }


def rollback_readout(*, clinic, since: datetime | None = None, now: datetime | None = None) -> dict:
    """The readout of one clinic (see the module docstring); ``ok`` is every invariant at once."""
    now = now or timezone.now()
    since = since or now - DEFAULT_SINCE
    # Read, never created: a clinic without a settings row runs with the defaults.
    row = ClinicReevaluationSettings.objects.filter(clinic=clinic).first() or ClinicReevaluationSettings(
        clinic=clinic, mutation_mode=dj_settings.REEVALUATION_DEFAULT_MODE, drain_state=DrainState.ACTIVE)
    leases = ReevaluationJob.objects.filter(clinic=clinic, state=JobState.RUNNING).aggregate(
        active=Count("pk", filter=Q(lease_expires_at__gt=now)),
        expired=Count("pk", filter=Q(lease_expires_at__lte=now) | Q(lease_expires_at__isnull=True)),
    )
    switch_off = row.mutation_mode == MutationMode.DISABLED
    drained = row.drain_state == DrainState.DRAINED and leases["active"] == 0
    confirmed = confirmed_changed(clinic, since)
    held = held_lost(clinic, since)
    checks = {
        "switch_off": switch_off,
        "drained_without_leases": drained,
        "no_confirmed_changed": confirmed["count"] == 0,
        "no_held_lost": held["count"] == 0,
    }
    return {
        "clinic": clinic.ref,
        "tenant_group": clinic.tenant_group.ref,
        "since": _iso(since),
        "read_at": _iso(now),
        "ok": all(checks.values()),
        "checks": checks,
        "mutation_mode": row.mutation_mode,
        "drain_state": row.drain_state,
        "drain_cause": row.drain_cause or None,
        "drain_changed_at": _iso(row.drain_changed_at),
        "active_leases": leases["active"],
        "expired_leases": leases["expired"],
        "confirmed_changed": confirmed,
        "held_lost": held,
        "rows": row_counts(clinic, since),
        "jobs": job_progress(clinic, since),
    }


def rows_preserved(before: dict, after: dict) -> dict:
    """Per row kind: whether the count now is at least the baseline's (nothing was deleted)."""
    return {kind: after["rows"][kind]["total"] >= before["rows"][kind]["total"] for kind in ROW_KINDS}


#: What each applying mode would have applied of a DRY_RUN's recorded outcomes.
APPLIED_BY_MODE = {
    MutationMode.APPLY_PROPOSED: (Outcome.PROPOSAL_SUPERSEDED, Outcome.CONFIRMED_CHANGE_PROPOSED),
    MutationMode.APPLY_PROPOSED_AND_HELD: (
        Outcome.PROPOSAL_SUPERSEDED, Outcome.CONFIRMED_CHANGE_PROPOSED, Outcome.HOLD_REPLACED,
        Outcome.FALLBACK_TO_PROPOSED,
    ),
}


def mode_comparison(*, clinic, since: datetime | None = None, now: datetime | None = None) -> dict:
    """Read-only: the outcomes recorded under each mode since ``since`` (recorded and applied, per outcome), the
    mode changes in that window (audit rows), and what the next applying modes would have applied of the
    DRY_RUN's would-be outcomes, so an operator sees what APPLY would do before enabling it. A DRY_RUN outcome
    is the decision APPLY would take on the same data; at apply time a slot may since be taken (HOLD_REPLACED
    then falls back), which the comparison cannot know."""
    now = now or timezone.now()
    since = since or now - DEFAULT_SINCE
    outcomes = ReevaluationOutcome.objects.filter(clinic=clinic, created_at__gte=since)
    by_mode: dict[str, dict] = {}
    for mode, outcome, applied, n in (
        outcomes.values_list("mode", "outcome", "applied").annotate(n=Count("pk")).values_list(
            "mode", "outcome", "applied", "n")
    ):
        counts = by_mode.setdefault(mode, {"jobs": 0, "outcomes": {}})["outcomes"].setdefault(
            outcome, {"recorded": 0, "applied": 0})
        counts["recorded"] += n
        if applied:
            counts["applied"] += n
    for mode, jobs in outcomes.values_list("mode").annotate(n=Count("job_id", distinct=True)).values_list("mode", "n"):
        by_mode[mode]["jobs"] = jobs
    dry = by_mode.get(MutationMode.DRY_RUN, {"outcomes": {}})["outcomes"]
    would = {
        mode: {o: dry[o]["recorded"] for o in applied if o in dry}
        for mode, applied in APPLIED_BY_MODE.items()
    }
    changes = [
        {"at": _iso(at), "from": (result or {}).get("from"), "to": (result or {}).get("to"), "actor": actor}
        for at, result, actor in AuditEntry.objects.filter(
            clinic_ref=clinic.ref, action="reevaluation.mode_set", created_at__gte=since
        ).order_by("created_at", "pk").values_list("created_at", "result", "actor_label")[:LIST_LIMIT]
    ]
    current = ClinicReevaluationSettings.objects.filter(clinic=clinic).values_list("mutation_mode", flat=True).first()
    return {
        "clinic": clinic.ref,
        "since": _iso(since),
        "current_mode": current or dj_settings.REEVALUATION_DEFAULT_MODE,
        "mode_changes": changes,
        "by_mode": by_mode,
        "dry_run_would_apply": would,
    }
