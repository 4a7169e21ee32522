from django.db import transaction
from guardian.shortcuts import assign_perm

from ..models import OPERATE_PERMISSION, ROLE_PERMISSIONS, Clinic, Role


def clinic_grant_role(*, clinic: Clinic, user, role: Role) -> None:
    """ADMIN implies STAFF: an admin gets both permissions so every staff check passes."""
    with transaction.atomic():
        assign_perm(f"scheduling.{ROLE_PERMISSIONS[Role.STAFF]}", user, clinic)
        if role == Role.ADMIN:
            assign_perm(f"scheduling.{ROLE_PERMISSIONS[Role.ADMIN]}", user, clinic)


def clinic_grant_operate(*, clinic: Clinic, user) -> None:
    """The "operate" grant: with the ADMIN role, the user may run ADMIN commands (not just read)."""
    assign_perm(f"scheduling.{OPERATE_PERMISSION}", user, clinic)


DECISION_FEED_PERMISSION = "feed_decisions"


def clinic_grant_decision_feed(*, clinic: Clinic, user) -> None:
    """Make ``user`` the clinic's booking-reliability feed credential: it may post decisions and nothing
    else (no STAFF role), and STAFF users without this grant may not post them."""
    assign_perm(f"scheduling.{DECISION_FEED_PERMISSION}", user, clinic)
