"""Reevaluation's front door: the commands other apps, tasks and management commands call, re-exported from
their feature packages (``intake/``, ``jobs/``, ``rounds/``, ``modes/``, ``redrive/``, ``proposals/``). Each
command is the only writer of its rows and opens its own transaction."""

from reevaluation.intake.services import IntakeResult, event_intake, event_intake_oversized, signed_headers
from reevaluation.jobs.claim import Claim, dispatch_round
from reevaluation.jobs.leases import Fence, lease_renew, rescue_expired_leases, wake_retries
from reevaluation.jobs.worker import job_run, job_run_claimed
from reevaluation.modes.services import drain_refresh, drain_set, due_override_set, mode_set, settings_for
from reevaluation.proposals.services import proposal_answer, proposal_confirm, proposal_reject, proposals_expire
from reevaluation.redrive.services import redrive_execute, redrive_preview
from reevaluation.rounds.services import work_round, work_round_states

__all__ = [
    "Claim",
    "Fence",
    "IntakeResult",
    "dispatch_round",
    "drain_refresh",
    "drain_set",
    "due_override_set",
    "event_intake",
    "event_intake_oversized",
    "job_run",
    "job_run_claimed",
    "lease_renew",
    "mode_set",
    "proposal_answer",
    "proposal_confirm",
    "proposal_reject",
    "proposals_expire",
    "redrive_execute",
    "redrive_preview",
    "rescue_expired_leases",
    "settings_for",
    "signed_headers",
    "wake_retries",
    "work_round",
    "work_round_states",
]
