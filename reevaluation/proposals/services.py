"""Proposal → acceptance → confirmation (issue 28): the only writers of proposals, options and consent rows.

* ``proposal_open`` (inside a job's write-back): the fitting times for one appointment, each held for the
  proposal's life where capacity allows (a scheduling hold, purpose ``REEVALUATION_PROPOSAL``). A time that
  overlaps the patient's own current appointment cannot be held (the patient-overlap constraint) and is
  offered unheld: the swap checks it again. Never touches an appointment.
* ``proposal_answer`` (the patient, on the proposal page): ACCEPT one option, KEEP the current appointment,
  or ask for a CALL. Each answer appends a ``ProposalConsent`` row (what was shown, what was chosen, when,
  channel). Accepting a change to a PROPOSED/HELD appointment applies it at once (the new time HELD); a
  change to a CONFIRMED one waits for an operator.
* ``proposal_confirm`` / ``proposal_reject`` (an operator, role from ``COMMAND_ROLES``): the swap in one
  transaction (``scheduling.services.swaps.appointment_swap``), or the refusal; both audited.
* ``proposals_expire`` (beat): live proposals past ``expires_at`` end EXPIRED. Expiry, KEEP, rejection and
  supersession release every hold the proposal placed and change no appointment.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import cast

from django.conf import settings as dj_settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from psycopg.types.range import Range

from common.cas import cas_update
from common.errors import Conflict, NotFound, PatientOverlap, SlotOccupied, ValidationFailed
from common.services import audit_record, new_correlation_id, outbox_enqueue
from reevaluation.proposals.models import (
    ANSWERABLE_STATES,
    HOLD_PURPOSE,
    LIVE_PROPOSAL_STATES,
    PROPOSAL_APPLIED_TOPIC,
    AppointmentProposal,
    ConsentChannel,
    ProposalChoice,
    ProposalConsent,
    ProposalOption,
    ProposalState,
)
from scheduling.models import (
    LIVE_HOLD_STATUSES,
    Appointment,
    AppointmentStatus,
    CancelActor,
    CapacityAllocation,
    cancel_actor_ref,
)
from scheduling.scoping import require_command_role
from scheduling.services import hold_place, hold_release
from scheduling.services.holds import lock_hold
from scheduling.services.swaps import appointment_swap

logger = logging.getLogger(__name__)

#: Candidate starts tried per proposal (the same start first, then later and earlier by one step each).
MAX_CANDIDATE_STARTS = 12


def proposal_hours() -> int:
    return int(getattr(dj_settings, "REEVALUATION_PROPOSAL_HOURS", 24))


def max_options() -> int:
    return int(getattr(dj_settings, "REEVALUATION_PROPOSAL_MAX_OPTIONS", 3))


def step_minutes() -> int:
    return int(getattr(dj_settings, "REEVALUATION_PROPOSAL_STEP_MINUTES", 30))


# --- opening a proposal (inside the job's write-back) --------------------------------------------------


def candidate_starts(appt: Appointment, now: datetime) -> list[datetime]:
    """The same start, then one step later, one earlier, two later, …: only future starts."""
    step = timedelta(minutes=step_minutes())
    starts = [appt.starts_at]
    for k in range(1, MAX_CANDIDATE_STARTS):
        starts += [appt.starts_at + k * step, appt.starts_at - k * step]
    return [s for s in starts if s > now][:MAX_CANDIDATE_STARTS]


def _period(starts_at: datetime, ends_at: datetime) -> Range:
    return Range(starts_at, ends_at, "[)")


def _free_but_for_current(appt: Appointment, spec: dict, starts_at: datetime, ends_at: datetime) -> bool:
    """The slot is free for the practitioner and resource, and the patient has nothing else there, once the
    current appointment's own allocation is left out (it is released by the swap that takes this time)."""
    overlapping = CapacityAllocation.objects.filter(
        clinic_id=appt.clinic_id, active=True, period__overlap=_period(starts_at, ends_at)
    ).exclude(appointment_id=appt.pk)
    who = Q(practitioner=spec["practitioner"]) | Q(patient_id=appt.patient_id)
    if spec["resource"] is not None:
        who |= Q(resource=spec["resource"])
    return not overlapping.filter(who).exists()


def _options_for(appt: Appointment, specs_at, *, expires_at: datetime, now: datetime,
                 fixed: list[tuple[datetime, dict]] | None = None) -> list[dict]:
    """Up to ``max_options()`` fitting times (one per start), each held where capacity allows."""
    tries = fixed if fixed is not None else [(s, spec) for s in candidate_starts(appt, now) for spec in specs_at]
    found: list[dict] = []
    starts_taken: set[datetime] = set()
    for starts_at, spec in tries:
        if len(found) >= max_options():
            break
        if starts_at in starts_taken:
            continue
        ends_at = starts_at + timedelta(minutes=spec["treatment"].duration_minutes)
        try:
            hold = hold_place(
                clinic=appt.clinic, practitioner_id=spec["practitioner"].pk, treatment_id=spec["treatment"].pk,
                resource_id=getattr(spec["resource"], "pk", None), patient_id=appt.patient_id,
                starts_at=starts_at, ends_at=ends_at, expires_at=expires_at, purpose=HOLD_PURPOSE,
            )
            found.append({**spec, "starts_at": starts_at, "ends_at": ends_at, "hold": hold, "hold_note": ""})
        except PatientOverlap:
            if appt.status == AppointmentStatus.CONFIRMED and _free_but_for_current(appt, spec, starts_at, ends_at):
                found.append({**spec, "starts_at": starts_at, "ends_at": ends_at, "hold": None,
                              "hold_note": "OVERLAPS_CURRENT"})
            else:
                continue
        except SlotOccupied:
            continue
        starts_taken.add(starts_at)
    return found


def proposal_open(*, job, appointment: Appointment, trigger: str, specs: list[dict], now: datetime,
                  fixed: list[tuple[datetime, dict]] | None = None) -> AppointmentProposal | None:
    """Open a proposal for ``appointment`` with the fitting times (``specs`` at candidate starts, or the
    ``fixed`` (start, spec) pairs), superseding any live one for it; None when no time fits.

    Runs inside the job's write-back transaction: the holds, the proposal and its options commit with the
    outcomes or not at all. The patient is told by the job's own notice (``notifications``).
    """
    expires_at = min(now + timedelta(hours=proposal_hours()), appointment.starts_at)
    if expires_at <= now:
        return None
    supersede_live(clinic_id=appointment.clinic_id, appointment_refs=[appointment.ref], now=now)
    options = _options_for(appointment, specs, expires_at=expires_at, now=now, fixed=fixed)
    if not options:
        return None
    proposal = AppointmentProposal.objects.create(
        tenant_group_id=job.tenant_group_id, clinic_id=job.clinic_id, patient_id=appointment.patient_id, job=job,
        revision=job.revision, assessment_ref=job.assessment_ref, assessment_hash=job.assessment_hash,
        appointment_ref=appointment.ref, appointment_status=appointment.status, trigger=trigger,
        needs_operator=appointment.status == AppointmentStatus.CONFIRMED, expires_at=expires_at, created_at=now,
    )
    ProposalOption.objects.bulk_create([
        ProposalOption(clinic_id=job.clinic_id, proposal=proposal, position=i, practitioner=o["practitioner"],
                       treatment=o["treatment"], resource=o["resource"], starts_at=o["starts_at"],
                       ends_at=o["ends_at"], hold=o["hold"], hold_note=o["hold_note"])
        for i, o in enumerate(sorted(options, key=lambda o: o["starts_at"]), start=1)
    ])
    return proposal


def supersede_live(*, clinic_id: int, appointment_refs: list[str], now: datetime) -> int:
    """A newer reevaluation of the same appointment: its live proposals end SUPERSEDED and release their holds."""
    return supersede_live_many(refs_by_clinic={clinic_id: appointment_refs}, now=now)


def supersede_live_many(*, refs_by_clinic: dict[int, list[str]], now: datetime) -> int:
    """``supersede_live`` for the appointments of several clinics in one locking read."""
    scope = Q()
    for clinic_id, refs in sorted(refs_by_clinic.items()):
        scope |= Q(clinic_id=clinic_id, appointment_ref__in=refs)
    if not scope:
        return 0
    ended = 0
    for proposal in (
        AppointmentProposal.objects.select_for_update(no_key=True)
        .filter(scope, state__in=LIVE_PROPOSAL_STATES)
        .order_by("pk")
    ):
        _end(proposal, ProposalState.SUPERSEDED, now=now, code="SUPERSEDED")
        ended += 1
    return ended


def _release_holds(proposal: AppointmentProposal, *, keep_option_id: int | None = None, reason: str) -> int:
    """Release every live hold of the proposal's options (but ``keep_option_id``'s), in id order."""
    released = 0
    hold_ids = (
        ProposalOption.objects.filter(proposal=proposal, hold__isnull=False, hold__status__in=LIVE_HOLD_STATUSES)
        .exclude(pk=keep_option_id or 0).order_by("hold_id").values_list("hold_id", flat=True)
    )
    for hold_id in hold_ids:
        hold = lock_hold(hold_id)
        if hold.status in LIVE_HOLD_STATUSES:
            hold_release(hold=hold, reason=reason)
            released += 1
    return released


def _end(proposal: AppointmentProposal, state: str, *, now: datetime, code: str, **changes) -> None:
    """A terminal state without a swap: the holds go, the appointment stays as it was."""
    cas_update(proposal, state=state, finished_at=now, end_code=code, **changes)
    _release_holds(proposal, reason=f"proposal_{state.lower()}"[:60])


# --- what the patient sees and answers -----------------------------------------------------------------


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def is_current(option: ProposalOption, current: Appointment | None) -> bool:
    """Whether ``option`` is the patient's current appointment itself (same time, practitioner, treatment, room)."""
    return current is not None and (option.starts_at, option.practitioner_id, option.treatment_id,
                                    option.resource_id) == (current.starts_at, current.practitioner_id,
                                                            current.treatment_id, current.resource_id)


def proposal_options(proposal: AppointmentProposal, current: Appointment | None) -> list[ProposalOption]:
    """The proposal's times the page offers, in order. A change to a CONFIRMED visit (``needs_operator``) never
    offers the visit itself as a "new" time: keeping it is the KEEP answer (the seed: a confirmed visit changes
    only by a new proposal the patient consents to). A proposal about a PROPOSED/HELD time may offer the time it
    proposes now (accepting it holds it); the page labels it as the current time."""
    options = list(proposal.options.select_related("treatment", "practitioner").order_by("position"))
    if not proposal.needs_operator:
        return options
    return [o for o in options if not is_current(o, current)]


def proposal_shown(proposal: AppointmentProposal) -> dict:
    """The facts the proposal page shows (refs and times; no names), in a canonical form: what the consent
    row records and what its digest covers, so an answer is tied to exactly what the patient saw."""
    current = (Appointment.objects.select_related("treatment", "practitioner")
               .filter(clinic_id=proposal.clinic_id, ref=proposal.appointment_ref).first())
    return {
        "proposal": proposal.ref,
        "expires_at": _iso(proposal.expires_at),
        "current": None if current is None else {
            "appointment": current.ref, "starts_at": _iso(current.starts_at),
            "treatment": current.treatment.ref, "practitioner": current.practitioner.ref, "status": current.status,
        },
        "options": [
            {"option": o.ref, "starts_at": _iso(o.starts_at), "ends_at": _iso(o.ends_at),
             "treatment": o.treatment.ref, "practitioner": o.practitioner.ref, "held": o.hold_id is not None}
            for o in proposal_options(proposal, current)
        ],
    }


def shown_digest(shown: dict) -> str:
    return hashlib.sha256(json.dumps(shown, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _lock_proposal(**filters) -> AppointmentProposal:
    proposal = (
        AppointmentProposal.objects.select_for_update(no_key=True, of=("self",))
        .select_related("clinic__tenant_group").filter(**filters).first()
    )
    if proposal is None:
        raise NotFound()
    return proposal


def _repeat(proposal: AppointmentProposal, choice: str, option_ref: str) -> bool:
    """A double submit of the answer already recorded: nothing to do again."""
    if choice == ProposalChoice.ACCEPT and proposal.state in (ProposalState.ACCEPTED, ProposalState.APPLIED):
        return proposal.chosen_option is not None and proposal.chosen_option.ref == option_ref
    return (choice, proposal.state) in (
        (ProposalChoice.KEEP, ProposalState.KEPT), (ProposalChoice.CALL, ProposalState.CALL_REQUESTED)
    )


def proposal_answer(*, proposal_ref: str, choice: str, option_ref: str = "", digest: str, language: str,
                    channel: str = ConsentChannel.PROPOSAL_PAGE, now: datetime | None = None) -> AppointmentProposal:
    """Record the patient's answer (a consent row) and act on it; a double submit changes nothing.

    Refusals (nothing recorded): VALIDATION_ERROR (an unknown choice or option), 409 PROPOSAL_CHANGED (the
    page showed something else than the proposal now holds), PROPOSAL_EXPIRED, PROPOSAL_ENDED, and a
    taken time on an immediate swap (SLOT_OCCUPIED, APPOINTMENT_CHANGED).
    """
    now = now or timezone.now()
    if choice not in ProposalChoice.values:
        raise ValidationFailed(fields={"choice": [f"One of {', '.join(ProposalChoice.values)}."]})
    with transaction.atomic():
        proposal = _lock_proposal(ref=proposal_ref)
        if _repeat(proposal, choice, option_ref):
            return proposal
        if proposal.state not in ANSWERABLE_STATES:
            raise Conflict(f"The proposal is {proposal.state}.", code="PROPOSAL_ENDED")
        if now >= proposal.expires_at:
            raise Conflict("The proposal has expired.", code="PROPOSAL_EXPIRED")
        shown = proposal_shown(proposal)
        if digest != shown_digest(shown):
            raise Conflict("The proposal changed since the page was shown.", code="PROPOSAL_CHANGED")
        option = None
        if choice == ProposalChoice.ACCEPT:
            option = ProposalOption.objects.select_related("practitioner", "treatment", "resource", "hold").filter(
                proposal=proposal, ref=option_ref).first()
            if option is None or option.ref not in {o["option"] for o in shown["options"]}:
                raise ValidationFailed(fields={"option": ["Not one of this proposal's times."]})
        before = proposal.state
        if choice == ProposalChoice.KEEP:
            _end(proposal, ProposalState.KEPT, now=now, code="PATIENT_KEPT", answered_at=now)
        elif choice == ProposalChoice.CALL:
            cas_update(proposal, state=ProposalState.CALL_REQUESTED, answered_at=now)
        elif proposal.needs_operator:
            assert option is not None
            cas_update(proposal, state=ProposalState.ACCEPTED, chosen_option=option, answered_at=now)
            _release_holds(proposal, keep_option_id=option.pk, reason="proposal_other_time_chosen")
        else:
            assert option is not None
            _apply(proposal, option, status=AppointmentStatus.HELD, now=now, answered_at=now,
                   cancelled_by=cancel_actor_ref(CancelActor.PATIENT, proposal.patient))
        ProposalConsent.objects.create(
            tenant_group_id=proposal.tenant_group_id, clinic_id=proposal.clinic_id, proposal=proposal, choice=choice,
            option=option, shown=shown, shown_digest=digest, channel=channel, language=language[:2],
            state_before=before, state_after=proposal.state, recorded_at=now,
        )
    logger.info("proposal=%s answered choice=%s state=%s", proposal.ref, choice, proposal.state)
    return proposal


def _apply(proposal: AppointmentProposal, option: ProposalOption, *, status: str, now: datetime, cancelled_by: str,
           **changes) -> None:
    """Swap the proposal's appointment for the option's time (one transaction; refused → nothing changes);
    ``cancelled_by``: who chose it (the patient on their page, or the confirming operator)."""
    current = Appointment.objects.filter(clinic_id=proposal.clinic_id, ref=proposal.appointment_ref).first()
    if current is None:
        raise NotFound()
    if current.status != proposal.appointment_status:
        raise Conflict("The appointment changed since the proposal was made.", code="APPOINTMENT_CHANGED")
    old, new = appointment_swap(
        clinic=proposal.clinic, appointment_ref=proposal.appointment_ref, expected_status=proposal.appointment_status,
        expected_version=None, practitioner=option.practitioner, treatment=option.treatment, resource=option.resource,
        starts_at=option.starts_at, status=status, reason=f"reevaluation:proposal {proposal.ref}",
        cancelled_by=cancelled_by, hold=option.hold,
    )
    cas_update(proposal, state=ProposalState.APPLIED, chosen_option=option, result_appointment_ref=new.ref,
               finished_at=now, end_code="APPLIED", **changes)
    _release_holds(proposal, keep_option_id=option.pk, reason="proposal_other_time_chosen")
    outbox_enqueue(
        topic=PROPOSAL_APPLIED_TOPIC, tenant_group_ref=proposal.clinic.tenant_group.ref,
        clinic_ref=proposal.clinic.ref, aggregate_ref=proposal.ref,
        recipient_ref=proposal.patient.ref,
        payload={"proposal": proposal.ref, "from": old.ref, "to": new.ref, "status": status, "job": proposal.job.ref},
    )


# --- the operator -------------------------------------------------------------------------------------


def _check_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if len(reason) < 5:
        raise ValidationFailed(fields={"reason": ["Give a reason (5–500 characters)."]})
    return reason[:500]


def proposal_confirm(*, clinic, proposal_ref: str, actor, reason: str, idempotency_key: str = "",
                     now: datetime | None = None) -> AppointmentProposal:
    """The operator's confirmation of an ACCEPTED change to a CONFIRMED appointment: the atomic swap (the old
    allocation released and the new one taken in one transaction) and an audit row. 409
    PROPOSAL_NOT_CONFIRMABLE (not accepted, or not a CONFIRMED change), PROPOSAL_EXPIRED, SLOT_OCCUPIED or
    APPOINTMENT_CHANGED (nothing changed: the proposal stays ACCEPTED for the operator to reject)."""
    require_command_role(actor, clinic, "proposal_confirm")
    reason = _check_reason(reason)
    now = now or timezone.now()
    with transaction.atomic():
        proposal = _lock_proposal(clinic=clinic, ref=proposal_ref)
        if proposal.state == ProposalState.APPLIED:
            raise Conflict("The change was already confirmed.", code="PROPOSAL_ALREADY_APPLIED")
        if proposal.state != ProposalState.ACCEPTED or not proposal.needs_operator:
            raise Conflict(f"The proposal is {proposal.state}.", code="PROPOSAL_NOT_CONFIRMABLE")
        if now >= proposal.expires_at:
            raise Conflict("The proposal has expired.", code="PROPOSAL_EXPIRED")
        option = ProposalOption.objects.select_related("practitioner", "treatment", "resource", "hold").get(
            pk=cast(int, proposal.chosen_option_id))
        _apply(proposal, option, status=AppointmentStatus.CONFIRMED, now=now, operator=actor, operator_reason=reason,
               cancelled_by=cancel_actor_ref(CancelActor.STAFF, actor))
        consent = proposal.consents.order_by("-recorded_at", "-pk").values_list("ref", flat=True).first()
        audit_record(
            actor=actor, action="reevaluation.proposal_confirm", clinic=clinic, target_ref=proposal.ref,
            reason=reason, idempotency_key=idempotency_key, correlation_id=new_correlation_id(),
            result={"proposal": proposal.ref, "from": proposal.appointment_ref, "to": proposal.result_appointment_ref,
                    "option": option.ref, "consent": consent, "job": proposal.job.ref,
                    "assessment_ref": proposal.assessment_ref, "assessment_hash": proposal.assessment_hash},
        )
    logger.info("proposal=%s confirmed from=%s to=%s", proposal.ref, proposal.appointment_ref,
                proposal.result_appointment_ref)
    return proposal


def proposal_reject(*, clinic, proposal_ref: str, actor, reason: str, idempotency_key: str = "",
                    now: datetime | None = None) -> AppointmentProposal:
    """An operator declines a live proposal: its holds are released, the appointment stays as it was; audited."""
    require_command_role(actor, clinic, "proposal_reject")
    reason = _check_reason(reason)
    now = now or timezone.now()
    with transaction.atomic():
        proposal = _lock_proposal(clinic=clinic, ref=proposal_ref)
        if proposal.state not in LIVE_PROPOSAL_STATES:
            raise Conflict(f"The proposal is {proposal.state}.", code="PROPOSAL_ENDED")
        _end(proposal, ProposalState.REJECTED, now=now, code="OPERATOR_REJECTED", operator=actor,
             operator_reason=reason)
        audit_record(
            actor=actor, action="reevaluation.proposal_reject", clinic=clinic, target_ref=proposal.ref, reason=reason,
            idempotency_key=idempotency_key, correlation_id=new_correlation_id(),
            result={"proposal": proposal.ref, "appointment": proposal.appointment_ref, "state": proposal.state},
        )
    return proposal


def proposals_expire(*, now: datetime | None = None, limit: int = 200) -> int:
    """End live proposals past their expiry (EXPIRED) and release their holds; bounded and safe to repeat."""
    now = now or timezone.now()
    expired = 0
    ids = list(
        AppointmentProposal.objects.filter(state__in=LIVE_PROPOSAL_STATES, expires_at__lte=now)
        .order_by("expires_at", "pk").values_list("pk", flat=True)[:limit]
    )
    for pk in ids:
        with transaction.atomic():
            proposal = (
                AppointmentProposal.objects.select_for_update(no_key=True, skip_locked=True)
                .filter(pk=pk, state__in=LIVE_PROPOSAL_STATES, expires_at__lte=now).first()
            )
            if proposal is None:
                continue
            _end(proposal, ProposalState.EXPIRED, now=now, code="EXPIRED")
            expired += 1
    if expired:
        logger.info("proposals expired=%s", expired)
    return expired
