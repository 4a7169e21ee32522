"""Reevaluation commands: the only writers of reevaluation rows (each opens its own transaction)."""

from .dispatch import Claim, dispatch_round
from .intake import IntakeResult, event_intake, event_intake_oversized, signed_headers
from .jobs import Fence, lease_renew, rescue_expired_leases, wake_retries
from .modes import drain_refresh, drain_set, due_override_set, mode_set, settings_for
from .redrive import redrive_execute, redrive_preview
from .worker import job_run

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
    "lease_renew",
    "mode_set",
    "redrive_execute",
    "redrive_preview",
    "rescue_expired_leases",
    "settings_for",
    "signed_headers",
    "wake_retries",
]
