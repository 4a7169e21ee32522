"""Who may run each reevaluation command (registered with ``scheduling.scoping`` at
``ReevaluationConfig.ready()``)."""

from scheduling.models import Role

COMMAND_ROLES: dict[str, Role] = {
    "redrive_preview": Role.STAFF,
    "redrive_execute": Role.ADMIN,
    "mode_set": Role.ADMIN,
    "drain_set": Role.ADMIN,
    "due_override_set": Role.ADMIN,
    # proposals (issue 28): the patient already chose the new time on the proposal page; the operator checks
    # and confirms it (or declines). Front-desk work, not destructive: STAFF.
    "proposal_confirm": Role.STAFF,
    "proposal_reject": Role.STAFF,
}
