"""Proposals to the patient when a reevaluation finds that an appointment should change (issue 28).

A proposal names the appointment it is about (``appointment_ref``: a CONFIRMED one that no longer fits, the
new PROPOSED of a superseded proposal, or a HELD one that fell back to PROPOSED), the job and the assessment
behind it (ref and hash), and up to a few fitting times (``ProposalOption``), each holding capacity through a
scheduling ``CapacityHold`` where capacity allows. Nothing here changes an appointment: the patient answers on
the proposal page (``ProposalConsent``, append-only evidence of what was shown, what was chosen, when, and
through which channel), and a change to a CONFIRMED appointment then waits for an operator's confirmation,
which swaps it atomically (``scheduling.services.swaps``). Refs, times and states only: no patient data.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from common.models import AppendOnlyQuerySet
from common.refs import RefField


class ProposalState(models.TextChoices):
    OPEN = "OPEN"  # told to the patient, waiting for an answer
    CALL_REQUESTED = "CALL_REQUESTED"  # the patient asked to be called; holds stay until expiry
    ACCEPTED = "ACCEPTED"  # the patient chose a time; a CONFIRMED change waits for an operator
    APPLIED = "APPLIED"  # the appointment moved to the chosen time (``result_appointment_ref``)
    KEPT = "KEPT"  # the patient keeps the current appointment
    REJECTED = "REJECTED"  # an operator declined the change
    EXPIRED = "EXPIRED"  # nobody finished it in time
    SUPERSEDED = "SUPERSEDED"  # a newer reevaluation made a new proposal for the same appointment


PROPOSAL_TRANSITIONS: dict[str, set[str]] = {
    ProposalState.OPEN: {
        ProposalState.CALL_REQUESTED, ProposalState.ACCEPTED, ProposalState.APPLIED, ProposalState.KEPT,
        ProposalState.REJECTED, ProposalState.EXPIRED, ProposalState.SUPERSEDED,
    },
    ProposalState.CALL_REQUESTED: {
        ProposalState.ACCEPTED, ProposalState.APPLIED, ProposalState.KEPT, ProposalState.REJECTED,
        ProposalState.EXPIRED, ProposalState.SUPERSEDED,
    },
    ProposalState.ACCEPTED: {
        ProposalState.APPLIED, ProposalState.REJECTED, ProposalState.EXPIRED, ProposalState.SUPERSEDED,
    },
    ProposalState.APPLIED: set(),
    ProposalState.KEPT: set(),
    ProposalState.REJECTED: set(),
    ProposalState.EXPIRED: set(),
    ProposalState.SUPERSEDED: set(),
}
#: States in which a proposal still holds capacity and can be answered or confirmed.
LIVE_PROPOSAL_STATES = (ProposalState.OPEN, ProposalState.CALL_REQUESTED, ProposalState.ACCEPTED)
#: What the patient may still answer from.
ANSWERABLE_STATES = (ProposalState.OPEN, ProposalState.CALL_REQUESTED)


class ProposalTrigger(models.TextChoices):
    """The reevaluation outcome that made the proposal."""

    CONFIRMED_NO_LONGER_FITS = "CONFIRMED_NO_LONGER_FITS"
    PROPOSAL_SUPERSEDED = "PROPOSAL_SUPERSEDED"
    FALLBACK_TO_PROPOSED = "FALLBACK_TO_PROPOSED"


class ProposalChoice(models.TextChoices):
    ACCEPT = "ACCEPT"  # one of the offered times
    KEEP = "KEEP"  # keep the current appointment
    CALL = "CALL"  # ask the clinic to call


class ConsentChannel(models.TextChoices):
    PROPOSAL_PAGE = "PROPOSAL_PAGE"  # the signed link in the notice


#: Holds a proposal places carry this purpose (the waitlist's sweeps only touch their own offers' holds).
HOLD_PURPOSE = "REEVALUATION_PROPOSAL"
#: Outbox topics: a proposal's own notices (the one that first tells the patient rides on the job's notice).
PROPOSAL_APPLIED_TOPIC = "reevaluation.proposal_applied"


class AppointmentProposal(models.Model):
    """One proposal about one appointment; at most one live proposal per appointment (partial unique index)."""

    #: The table ``common.cas`` checks every state write against.
    STATE_MACHINE = ("state", PROPOSAL_TRANSITIONS)

    ref = RefField(prefix="rpp")
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    patient = models.ForeignKey("scheduling.Patient", on_delete=models.PROTECT, related_name="+")
    job = models.ForeignKey("reevaluation.ReevaluationJob", on_delete=models.PROTECT, related_name="proposals")
    revision = models.BigIntegerField()
    assessment_ref = models.CharField(max_length=100)
    assessment_hash = models.CharField(max_length=64)
    appointment_ref = models.CharField(max_length=40, help_text="the appointment the proposal would change")
    appointment_status = models.CharField(max_length=12, help_text="its status when the proposal was made")
    trigger = models.CharField(max_length=32, choices=ProposalTrigger.choices)
    needs_operator = models.BooleanField(default=False, help_text="a CONFIRMED change: an operator confirms")
    state = models.CharField(max_length=16, choices=ProposalState.choices, default=ProposalState.OPEN)
    expires_at = models.DateTimeField()
    chosen_option = models.ForeignKey(
        "reevaluation.ProposalOption", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    result_appointment_ref = models.CharField(max_length=40, blank=True, default="")
    operator = models.ForeignKey("auth.User", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    operator_reason = models.CharField(max_length=500, blank=True, default="")
    end_code = models.CharField(max_length=40, blank=True, default="", help_text="why it ended, if it did")
    answered_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["clinic", "appointment_ref"],
                condition=Q(state__in=["OPEN", "CALL_REQUESTED", "ACCEPTED"]),
                name="rprop_one_live_per_appointment",
            ),
        ]
        indexes = [
            models.Index(fields=["clinic", "state", "-created_at"], name="rprop_clinic_state"),
            models.Index(fields=["state", "expires_at"], name="rprop_expiry",
                         condition=Q(state__in=["OPEN", "CALL_REQUESTED", "ACCEPTED"])),
        ]

    def __str__(self) -> str:
        return f"{self.ref} {self.state}"


class ProposalOption(models.Model):
    """One fitting time of a proposal; ``hold`` reserves it while the proposal lives, where capacity allowed."""

    ref = RefField(prefix="rpo")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    proposal = models.ForeignKey(AppointmentProposal, on_delete=models.PROTECT, related_name="options")
    position = models.PositiveSmallIntegerField()
    practitioner = models.ForeignKey("scheduling.Practitioner", on_delete=models.PROTECT, related_name="+")
    treatment = models.ForeignKey("scheduling.Treatment", on_delete=models.PROTECT, related_name="+")
    resource = models.ForeignKey("scheduling.Resource", on_delete=models.PROTECT, null=True, blank=True,
                                 related_name="+")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    hold = models.ForeignKey("scheduling.CapacityHold", on_delete=models.PROTECT, null=True, blank=True,
                             related_name="+")
    hold_note = models.CharField(
        max_length=24, blank=True, default="",
        help_text="why no hold: OVERLAPS_CURRENT (the patient's own current time; checked again at the swap)",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["clinic", "proposal", "position"], name="rpo_one_per_position"),
        ]

    def __str__(self) -> str:
        return f"{self.ref} #{self.position}"


class ProposalConsent(models.Model):
    """Append-only consent evidence: what the patient was shown, what they chose, when, and through which
    channel. One row per answer; nothing is ever updated or deleted."""

    ref = RefField(prefix="rce")
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    proposal = models.ForeignKey(AppointmentProposal, on_delete=models.PROTECT, related_name="consents")
    choice = models.CharField(max_length=8, choices=ProposalChoice.choices)
    option = models.ForeignKey(ProposalOption, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    shown = models.JSONField(help_text="the current appointment and the options as the page showed them (refs, times)")
    shown_digest = models.CharField(max_length=64, help_text="SHA-256 of ``shown`` (canonical JSON)")
    channel = models.CharField(max_length=16, choices=ConsentChannel.choices)
    language = models.CharField(max_length=2)
    actor = models.CharField(max_length=150, default="patient")
    state_before = models.CharField(max_length=16)
    state_after = models.CharField(max_length=16)
    recorded_at = models.DateTimeField()

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["proposal", "recorded_at"], name="rce_proposal_time")]

    def __str__(self) -> str:
        return f"{self.proposal_id} {self.choice}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("ProposalConsent is append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("ProposalConsent is append-only.")
