"""Reevaluation rows: inbox, quarantine, per-scope heads, per-revision jobs, outcomes, clinic settings.

Every tenant-owned row carries its tenant group and clinic, and every unique constraint includes the
clinic, so the tables can be distributed by clinic. No row here holds patient names, contacts or
assessment content: refs, fingerprints (opaque SHA-256), states, codes and digests only.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from common.refs import RefField


class MutationMode(models.TextChoices):
    DISABLED = "DISABLED"
    DRY_RUN = "DRY_RUN"
    APPLY_PROPOSED = "APPLY_PROPOSED"
    APPLY_PROPOSED_AND_HELD = "APPLY_PROPOSED_AND_HELD"


class DrainState(models.TextChoices):
    ACTIVE = "ACTIVE"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"


class DrainCause(models.TextChoices):
    """Why a clinic is not ACTIVE: an ADMIN's switch, the automatic stop on repeated quarantine, or the
    immediate stop on one privacy-boundary case from a trusted, correctly signed source."""

    ADMIN = "ADMIN"
    QUARANTINE_REPEATED = "QUARANTINE_REPEATED"
    PRIVACY_BOUNDARY = "PRIVACY_BOUNDARY"


DRAIN_TRANSITIONS: dict[str, set[str]] = {
    DrainState.ACTIVE: {DrainState.DRAINING},
    DrainState.DRAINING: {DrainState.DRAINED, DrainState.ACTIVE},
    DrainState.DRAINED: {DrainState.ACTIVE},
}

#: The seed's rollout order. A mode moves one step forward or one step back; DISABLED (rollback)
#: is reachable from every mode. Anything else (e.g. DISABLED → APPLY_PROPOSED_AND_HELD) is refused.
ROLLOUT_ORDER: tuple[str, ...] = (
    MutationMode.DISABLED,
    MutationMode.DRY_RUN,
    MutationMode.APPLY_PROPOSED,
    MutationMode.APPLY_PROPOSED_AND_HELD,
)


def mode_moves(current: str) -> list[str]:
    """The modes ``mode_set`` accepts from ``current``, in rollout order (never ``current`` itself)."""
    i = ROLLOUT_ORDER.index(current)
    allowed = {MutationMode.DISABLED, *ROLLOUT_ORDER[max(i - 1, 0) : i + 2]} - {current}
    return [mode for mode in ROLLOUT_ORDER if mode in allowed]


def drain_moves(current: str, *, leases_active: bool) -> list[str]:
    """The drain states ``drain_set`` accepts from ``current`` (DRAINED only once no lease is active)."""
    allowed = DRAIN_TRANSITIONS[current]
    if leases_active:
        allowed = allowed - {DrainState.DRAINED}
    return [state for state in DrainState.values if state in allowed]


class ClinicReevaluationSettings(models.Model):
    """One row per clinic: mutation mode, drain state, due-time overrides and health counters."""

    #: The table ``common.cas`` checks every status write against.
    STATE_MACHINE = ("drain_state", DRAIN_TRANSITIONS)

    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    clinic = models.OneToOneField(
        "scheduling.Clinic", on_delete=models.PROTECT, related_name="reevaluation_settings"
    )
    mutation_mode = models.CharField(
        max_length=24, choices=MutationMode.choices, default=MutationMode.DISABLED
    )
    drain_state = models.CharField(max_length=10, choices=DrainState.choices, default=DrainState.ACTIVE)
    held_due_minutes = models.PositiveIntegerField(null=True, blank=True, help_text="override of 5 minutes")
    proposed_due_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="override of 30 minutes"
    )
    drain_cause = models.CharField(max_length=24, choices=DrainCause.choices, blank=True, default="")
    drain_detail = models.JSONField(
        default=dict, blank=True, help_text="counts and refs behind an automatic drain (no patient data)"
    )
    drain_changed_at = models.DateTimeField(null=True, blank=True)
    policy_ref = models.CharField(
        max_length=100, blank=True, default="", help_text="the clinic's current assessment policy"
    )
    policy_generation = models.BigIntegerField(
        null=True, blank=True, help_text="highest generation accepted; never moves back"
    )
    consecutive_assessment_failures = models.PositiveIntegerField(default=0)
    lease_renewal_failures = models.PositiveIntegerField(default=0)
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "clinic reevaluation settings"

    def __str__(self) -> str:
        return f"{self.clinic_id} {self.mutation_mode} {self.drain_state}"


class DispatchCursor(models.Model):
    """The fair dispatcher's persisted position: the id of the last clinic served.

    The row is locked (``FOR NO KEY UPDATE``) for the length of a dispatch round, which serializes rounds
    and therefore cursor updates; a duplicate beat tick waits and then finds nothing new to claim.
    """

    name = models.CharField(max_length=40, unique=True)
    last_clinic_id = models.BigIntegerField(default=0)
    rounds = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name}@{self.last_clinic_id}"


class InboxStatus(models.TextChoices):
    ACCEPTED = "ACCEPTED"
    LATE = "LATE"
    DUPLICATE_REVISION = "DUPLICATE_REVISION"


INBOX_TRANSITIONS: dict[str, set[str]] = {
    # Intake accepts the event; job creation may then find it late or a repeat of a revision already seen.
    InboxStatus.ACCEPTED: {InboxStatus.LATE, InboxStatus.DUPLICATE_REVISION},
    InboxStatus.LATE: set(),
    InboxStatus.DUPLICATE_REVISION: set(),
}


class InboxEvent(models.Model):
    """An accepted (authentic, well-formed, in-scope) event; ``event_id`` is processed once."""

    #: The moves ``reevaluation.services`` makes (no ``version``: the row is written once more at most).
    STATE_MACHINE = ("status", INBOX_TRANSITIONS)

    ref = RefField(prefix="rev")
    event_id = models.CharField(max_length=100)
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    fingerprint = models.CharField(max_length=64)
    profile_revision = models.BigIntegerField()
    material_change = models.BooleanField()
    occurred_at = models.DateTimeField()
    body_digest = models.CharField(max_length=64, help_text="SHA-256 of the raw body")
    key_id = models.CharField(max_length=40)
    status = models.CharField(max_length=20, choices=InboxStatus.choices)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # The clinic leads every unique constraint (distributable by clinic); intake also refuses an
        # event id already seen in another clinic (EVENT_ID_REUSED).
        constraints = [models.UniqueConstraint(fields=["clinic", "event_id"], name="rinbox_event_once")]
        indexes = [
            models.Index(fields=["clinic", "-received_at"], name="rinbox_clinic_recent"),
            models.Index(fields=["event_id"], name="rinbox_event_id"),
        ]

    def __str__(self) -> str:
        return self.ref


class QuarantineReason(models.TextChoices):
    SIGNATURE_INVALID = "SIGNATURE_INVALID"
    KEY_UNKNOWN = "KEY_UNKNOWN"
    ISSUER_INVALID = "ISSUER_INVALID"
    AUDIENCE_INVALID = "AUDIENCE_INVALID"
    KEY_TENANT_MISMATCH = "KEY_TENANT_MISMATCH"
    SCHEMA_INVALID = "SCHEMA_INVALID"
    FINGERPRINT_INVALID = "FINGERPRINT_INVALID"
    SCOPE_INVALID = "SCOPE_INVALID"
    PRIVACY_BOUNDARY = "PRIVACY_BOUNDARY"
    EVENT_ID_REUSED = "EVENT_ID_REUSED"
    ASSESSMENT_HASH_MISMATCH = "ASSESSMENT_HASH_MISMATCH"
    ASSESSMENT_REVISION_MISMATCH = "ASSESSMENT_REVISION_MISMATCH"
    ASSESSMENT_CONTRACT_INVALID = "ASSESSMENT_CONTRACT_INVALID"
    ASSESSMENT_POLICY_STALE = "ASSESSMENT_POLICY_STALE"


class QuarantineCategory(models.TextChoices):
    TRUST = "TRUST"
    SCHEMA = "SCHEMA"
    SCOPE = "SCOPE"
    PRIVACY = "PRIVACY"
    CONTRACT = "CONTRACT"


QUARANTINE_CATEGORY: dict[str, QuarantineCategory] = {
    QuarantineReason.SIGNATURE_INVALID: QuarantineCategory.TRUST,
    QuarantineReason.KEY_UNKNOWN: QuarantineCategory.TRUST,
    QuarantineReason.ISSUER_INVALID: QuarantineCategory.TRUST,
    QuarantineReason.AUDIENCE_INVALID: QuarantineCategory.TRUST,
    QuarantineReason.KEY_TENANT_MISMATCH: QuarantineCategory.TRUST,
    QuarantineReason.SCHEMA_INVALID: QuarantineCategory.SCHEMA,
    QuarantineReason.FINGERPRINT_INVALID: QuarantineCategory.SCHEMA,
    QuarantineReason.SCOPE_INVALID: QuarantineCategory.SCOPE,
    QuarantineReason.PRIVACY_BOUNDARY: QuarantineCategory.PRIVACY,
    QuarantineReason.EVENT_ID_REUSED: QuarantineCategory.CONTRACT,
    QuarantineReason.ASSESSMENT_HASH_MISMATCH: QuarantineCategory.CONTRACT,
    QuarantineReason.ASSESSMENT_REVISION_MISMATCH: QuarantineCategory.CONTRACT,
    QuarantineReason.ASSESSMENT_CONTRACT_INVALID: QuarantineCategory.CONTRACT,
    QuarantineReason.ASSESSMENT_POLICY_STALE: QuarantineCategory.CONTRACT,
}


class FailureClass(models.TextChoices):
    """What a FAILED job's last failure code means for a redrive (docs/reevaluation.md)."""

    TRANSIENT = "TRANSIENT"  # timeouts, 5xx/429, lost leases, worker errors: safe to run again
    CONTRACT = "CONTRACT"  # the CRM answered outside the contract: investigate with the CRM first
    TRUST_PRIVACY = "TRUST_PRIVACY"  # trust or privacy boundary, or a protection invariant: incident first


TRANSIENT_FAILURE_CODES = frozenset(
    {"ASSESSMENT_TIMEOUT", "ASSESSMENT_UNAVAILABLE", "LEASE_EXPIRED", "WORKER_ERROR"}
)
TRUST_PRIVACY_FAILURE_CODES = frozenset(
    {
        QuarantineReason.PRIVACY_BOUNDARY,
        QuarantineReason.SIGNATURE_INVALID,
        QuarantineReason.KEY_UNKNOWN,
        QuarantineReason.ISSUER_INVALID,
        QuarantineReason.AUDIENCE_INVALID,
        QuarantineReason.SCOPE_INVALID,
        "CONFIRMED_PROTECTED",
    }
)


def failure_class(code: str) -> str:
    """Unknown codes count as CONTRACT: never redriven by default."""
    if code in TRANSIENT_FAILURE_CODES:
        return FailureClass.TRANSIENT
    if code in TRUST_PRIVACY_FAILURE_CODES:
        return FailureClass.TRUST_PRIVACY
    return FailureClass.CONTRACT


class QuarantineCase(models.Model):
    """Evidence of a refused event or assessment: a bounded code and a digest, never the raw body."""

    ref = RefField(prefix="rqc")
    reason_code = models.CharField(max_length=40, choices=QuarantineReason.choices)
    category = models.CharField(max_length=10, choices=QuarantineCategory.choices)
    evidence_digest = models.CharField(max_length=64, help_text="SHA-256 of the refused bytes")
    evidence_size = models.PositiveIntegerField(default=0)
    source = models.CharField(max_length=12, default="EVENT", help_text="EVENT or ASSESSMENT")
    event_id = models.CharField(max_length=100, blank=True, default="", help_text="only if well-formed")
    key_id = models.CharField(max_length=40, blank=True, default="", help_text="only if well-formed")
    tenant_group = models.ForeignKey(
        "scheduling.TenantGroup", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    clinic = models.ForeignKey(
        "scheduling.Clinic", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    job = models.ForeignKey(
        "ReevaluationJob", on_delete=models.PROTECT, null=True, blank=True, related_name="quarantine_cases"
    )
    correlation_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["clinic", "-created_at", "-id"], name="rquar_clinic_recent"),
            models.Index(fields=["reason_code", "-created_at"], name="rquar_reason_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.reason_code} {self.ref}"


class QuarantineTally(models.Model):
    """Refused events per source and minute: always counted, even when only a sample of cases is stored.

    A source is ``addr:<client address>`` for trust failures (nobody vouched for the sender) and
    ``key:<key id>`` once a key verified. Bounds the quarantine table under a flood (issue 16).
    """

    source = models.CharField(max_length=80)
    window_start = models.DateTimeField()
    refused = models.PositiveIntegerField(default=0)
    stored = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "window_start"], name="rquar_tally_once_per_window")
        ]
        indexes = [models.Index(fields=["-window_start"], name="rquar_tally_recent")]

    def __str__(self) -> str:
        return f"{self.source}@{self.window_start:%H:%M} {self.stored}/{self.refused}"


class ReevaluationHead(models.Model):
    """The newest revision seen for one scope (tenant group, clinic, fingerprint). Never moves back."""

    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    fingerprint = models.CharField(max_length=64)
    revision = models.BigIntegerField()
    assessment_ref = models.CharField(max_length=100)
    assessment_hash = models.CharField(max_length=64)
    event = models.ForeignKey(InboxEvent, on_delete=models.PROTECT, related_name="+")
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["clinic", "tenant_group", "fingerprint"], name="rhead_one_per_scope"
            )
        ]

    def __str__(self) -> str:
        return f"{self.fingerprint[:8]}@{self.revision}"


class JobState(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    RETRY_WAIT = "RETRY_WAIT"
    COMPLETED = "COMPLETED"
    STALE = "STALE"
    FAILED = "FAILED"


JOB_TRANSITIONS: dict[str, set[str]] = {
    JobState.PENDING: {JobState.RUNNING, JobState.STALE},
    JobState.RUNNING: {
        JobState.COMPLETED,
        JobState.RETRY_WAIT,
        JobState.FAILED,
        JobState.STALE,
        JobState.PENDING,  # lease rescue
    },
    JobState.RETRY_WAIT: {JobState.PENDING, JobState.STALE},
    JobState.COMPLETED: set(),
    JobState.STALE: set(),
    JobState.FAILED: set(),  # a redrive makes a new job in the lineage; the FAILED row stays as evidence
}
ACTIVE_JOB_STATES = frozenset({JobState.PENDING, JobState.RUNNING, JobState.RETRY_WAIT})


class PriorityClass(models.TextChoices):
    HELD_PRESENT = "HELD_PRESENT"
    PROPOSED_ONLY = "PROPOSED_ONLY"


#: Lower sorts first: HELD_PRESENT before PROPOSED_ONLY.
PRIORITY_RANK = {PriorityClass.HELD_PRESENT: 0, PriorityClass.PROPOSED_ONLY: 1}


class ReevaluationJob(models.Model):
    """One durable unit of work for one revision of one scope (redrives add rows to its lineage)."""

    #: The table ``common.cas`` checks every status write against.
    STATE_MACHINE = ("state", JOB_TRANSITIONS)

    ref = RefField(prefix="rjb")
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    fingerprint = models.CharField(max_length=64)
    revision = models.BigIntegerField()
    event = models.ForeignKey(InboxEvent, on_delete=models.PROTECT, related_name="jobs")
    assessment_ref = models.CharField(max_length=100)
    assessment_hash = models.CharField(max_length=64)
    material_change = models.BooleanField(default=True)
    state = models.CharField(max_length=12, choices=JobState.choices, default=JobState.PENDING)
    priority_class = models.CharField(max_length=16, choices=PriorityClass.choices)
    priority = models.PositiveSmallIntegerField(help_text="0 HELD_PRESENT, 1 PROPOSED_ONLY")
    due_at = models.DateTimeField()
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=5)
    cooldown_seconds = models.PositiveIntegerField(default=30)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_failure_code = models.CharField(max_length=40, blank=True, default="")
    lease_owner = models.CharField(max_length=80, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_renewed_at = models.DateTimeField(null=True, blank=True)
    renewal_failures = models.PositiveIntegerField(default=0)
    first_claimed_at = models.DateTimeField(null=True, blank=True)
    redrive_of = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="redrives"
    )
    lineage_root = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    redrive_reason = models.CharField(max_length=200, blank=True, default="")
    target_policy_ref = models.CharField(max_length=100, blank=True, default="")
    target_policy_generation = models.BigIntegerField(null=True, blank=True)
    held_targets = models.JSONField(default=list, help_text="appointment refs HELD at intake")
    proposed_targets = models.JSONField(default=list, help_text="appointment refs PROPOSED at intake")
    outcome_counts = models.JSONField(default=dict)
    needs_staff = models.BooleanField(
        default=False, help_text="completed with a PROPOSED that no longer fits and has no replacement"
    )
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    # Not stored: the refs a worker's own claim attaches (services/dispatch.py) so no re-read is needed.
    clinic_ref: str
    tenant_group_ref: str
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One job per (scope, revision); redrives hang below it, at most one child per job.
            models.UniqueConstraint(
                fields=["clinic", "tenant_group", "fingerprint", "revision"],
                condition=Q(redrive_of__isnull=True),
                name="rjob_one_per_scope_revision",
            ),
            models.UniqueConstraint(
                fields=["clinic", "redrive_of"],
                condition=Q(redrive_of__isnull=False),
                name="rjob_one_redrive_per_job",
            ),
        ]
        indexes = [
            # The per-clinic LATERAL claim walks this index: cost ~ per-clinic limit, not backlog.
            models.Index(
                fields=["clinic", "priority", "due_at", "id"],
                condition=Q(state="PENDING"),
                name="rjob_claim",
            ),
            models.Index(fields=["clinic", "state", "priority", "due_at"], name="rjob_clinic_state"),
            models.Index(fields=["state", "lease_expires_at"], name="rjob_lease_expiry"),
            models.Index(fields=["state", "next_attempt_at"], name="rjob_retry_due"),
            models.Index(fields=["clinic", "fingerprint", "state"], name="rjob_scope_state"),
            models.Index(
                fields=["clinic", "priority", "due_at", "ref"],
                condition=Q(needs_staff=True),
                name="rjob_needs_staff",
            ),
            # The console's finished-jobs list, newest first (keyset on finished_at, id).
            models.Index(
                fields=["clinic", "-finished_at", "-id"], name="rjob_clinic_finished",
                condition=models.Q(finished_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.ref} {self.state}"


class Outcome(models.TextChoices):
    PROPOSAL_SUPERSEDED = "PROPOSAL_SUPERSEDED"
    HOLD_KEPT = "HOLD_KEPT"
    HOLD_REPLACED = "HOLD_REPLACED"
    FALLBACK_TO_PROPOSED = "FALLBACK_TO_PROPOSED"
    SKIPPED_INELIGIBLE = "SKIPPED_INELIGIBLE"
    SKIPPED_UNCHANGED = "SKIPPED_UNCHANGED"
    PROPOSAL_NEEDS_STAFF = "PROPOSAL_NEEDS_STAFF"
    # A CONFIRMED appointment that no longer fits the new assessment: it is never changed here. Applied: a
    # proposal was made to the patient (``proposal``); not applied (DRY_RUN): one would have been.
    CONFIRMED_CHANGE_PROPOSED = "CONFIRMED_CHANGE_PROPOSED"
    # ... and no fitting time was found: left as it is, the job asks staff (NEEDS STAFF).
    CONFIRMED_NEEDS_STAFF = "CONFIRMED_NEEDS_STAFF"


#: The outbox topic a completed job writes (handled by ``reevaluation.notifications``).
JOB_COMPLETED_TOPIC = "reevaluation.job_completed"

#: Outcomes that change what the patient was offered: staff see them, the patient is told.
CHANGE_OUTCOMES = (Outcome.PROPOSAL_SUPERSEDED, Outcome.HOLD_REPLACED, Outcome.FALLBACK_TO_PROPOSED)
#: Outcomes that leave the job in the action queue for staff (NEEDS STAFF).
NEEDS_STAFF_OUTCOMES = (Outcome.PROPOSAL_NEEDS_STAFF, Outcome.CONFIRMED_NEEDS_STAFF)


class ReevaluationOutcome(models.Model):
    """The decision for one appointment in one job; ``applied`` is False in dry runs."""

    ref = RefField(prefix="rout")
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    job = models.ForeignKey(ReevaluationJob, on_delete=models.PROTECT, related_name="outcomes")
    appointment_ref = models.CharField(max_length=40)
    status_before = models.CharField(max_length=12)
    outcome = models.CharField(max_length=32, choices=Outcome.choices)
    applied = models.BooleanField(default=False)
    mode = models.CharField(max_length=24, choices=MutationMode.choices)
    replacement_ref = models.CharField(max_length=40, blank=True, default="")
    # The assessment the decision was made on (its ref and hash, as the job verified them) and the proposal
    # it made to the patient, if any: "why did this appointment move" is answerable from either end.
    assessment_ref = models.CharField(max_length=100, blank=True, default="")
    assessment_hash = models.CharField(max_length=64, blank=True, default="")
    proposal = models.ForeignKey(
        "reevaluation.AppointmentProposal", on_delete=models.PROTECT, null=True, blank=True, related_name="outcomes"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["clinic", "job", "appointment_ref"], name="rout_one_per_job_appt")
        ]
        indexes = [models.Index(fields=["clinic", "-created_at", "-id"], name="rout_clinic_recent")]

    def __str__(self) -> str:
        return f"{self.appointment_ref} {self.outcome}"


class RedrivePreview(models.Model):
    """The exact job set a PREVIEW showed; EXECUTE acts on these ids only (re-checked under lock)."""

    ref = RefField(prefix="rpv")
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    actor = models.ForeignKey("auth.User", on_delete=models.PROTECT, related_name="+")
    reason = models.CharField(max_length=500)
    target_revision = models.BigIntegerField(null=True, blank=True)
    limit = models.PositiveIntegerField()
    failure_classes = models.JSONField(default=list, help_text="the FailureClass values previewed")
    job_ids = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    executed_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict)

    def __str__(self) -> str:
        return self.ref


# Proposal models live in their own module; imported here so Django registers them with this app.
from reevaluation.proposals.models import AppointmentProposal, ProposalConsent, ProposalOption  # noqa: E402,F401
