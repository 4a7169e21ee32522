"""Reads of proposals for the console and the API: refs, states, times and codes (no patient data).

``proposal_detail`` answers "why did this appointment move" from the proposal's end: the job and the
assessment (ref and hash) behind it, the outcome rows that link to it, every consent row (what was shown,
what was chosen, when, channel) and the resulting appointment.
"""

from __future__ import annotations

from common.errors import NotFound
from reevaluation.proposals.models import LIVE_PROPOSAL_STATES, AppointmentProposal, ProposalState


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def _row(p: AppointmentProposal) -> dict:
    return {
        "proposal": p.ref,
        "state": p.state,
        "trigger": p.trigger,
        "appointment": p.appointment_ref,
        "appointment_status": p.appointment_status,
        "needs_operator": p.needs_operator,
        "awaiting_operator": p.state == ProposalState.ACCEPTED and p.needs_operator,
        "job": p.job.ref,
        "revision": p.revision,
        "assessment_ref": p.assessment_ref,
        "assessment_hash": p.assessment_hash,
        "chosen_option": p.chosen_option.ref if p.chosen_option else None,
        "result_appointment": p.result_appointment_ref or None,
        "expires_at": _iso(p.expires_at),
        "answered_at": _iso(p.answered_at),
        "finished_at": _iso(p.finished_at),
        "end_code": p.end_code or None,
        "created_at": _iso(p.created_at),
    }


def proposal_list(*, clinic, states=None, limit: int = 50) -> list[dict]:
    """Newest first; ``states`` None = the live ones (awaiting the patient or an operator)."""
    queryset = AppointmentProposal.objects.select_related("job", "chosen_option").filter(clinic=clinic)
    queryset = queryset.filter(state__in=list(states) if states else LIVE_PROPOSAL_STATES)
    return [_row(p) for p in queryset.order_by("-created_at", "-pk")[:limit]]


def proposal_detail(*, clinic, proposal_ref: str) -> dict:
    proposal = (
        AppointmentProposal.objects.select_related("job", "chosen_option", "operator")
        .filter(clinic=clinic, ref=proposal_ref).first()
    )
    if proposal is None:
        raise NotFound()
    body = _row(proposal)
    body["operator"] = proposal.operator.get_username() if proposal.operator else None
    body["operator_reason"] = proposal.operator_reason or None
    body["options"] = [
        {"option": o.ref, "position": o.position, "starts_at": _iso(o.starts_at), "ends_at": _iso(o.ends_at),
         "practitioner": o.practitioner.ref, "treatment": o.treatment.ref,
         "resource": o.resource.ref if o.resource else None,
         "hold": o.hold.ref if o.hold else None, "hold_status": o.hold.status if o.hold else None,
         "hold_note": o.hold_note or None}
        for o in proposal.options.select_related("practitioner", "treatment", "resource", "hold").order_by("position")
    ]
    body["consents"] = [
        {"consent": c.ref, "choice": c.choice, "option": c.option.ref if c.option_id else None,
         "channel": c.channel, "language": c.language, "actor": c.actor, "recorded_at": _iso(c.recorded_at),
         "state_before": c.state_before, "state_after": c.state_after, "shown": c.shown,
         "shown_digest": c.shown_digest}
        for c in proposal.consents.select_related("option").order_by("recorded_at", "pk")
    ]
    body["outcomes"] = [
        {"outcome_ref": o.ref, "job": o.job.ref, "appointment": o.appointment_ref, "outcome": o.outcome,
         "applied": o.applied, "mode": o.mode, "assessment_ref": o.assessment_ref,
         "assessment_hash": o.assessment_hash}
        for o in proposal.outcomes.select_related("job").order_by("pk")
    ]
    return body


def proposals_for_appointment(*, clinic, appointment_ref: str) -> list[dict]:
    """From the appointment's end: the proposals about it, or that produced it."""
    queryset = AppointmentProposal.objects.select_related("job", "chosen_option").filter(clinic=clinic)
    about = queryset.filter(appointment_ref=appointment_ref) | queryset.filter(result_appointment_ref=appointment_ref)
    return [_row(p) for p in about.order_by("-created_at", "-pk")[:20]]
