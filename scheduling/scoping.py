"""The one scoping helper every API view and console page goes through.

A clinic the user has no role in is indistinguishable from a clinic that does not exist.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet

from common.errors import NotFound, PermissionDenied
from common.fastpath import PreparedQuery

from . import queries
from .models import (
    OPERATE_PERMISSION,
    ROLE_PERMISSIONS,
    Clinic,
    ClinicGroupObjectPermission,
    ClinicUserObjectPermission,
    Role,
)

M = TypeVar("M", bound=Model)


def _plausible_ref(ref) -> bool:
    """A string PostgreSQL can compare: a NUL byte (refused by the server) cannot be in any ref."""
    return isinstance(ref, str) and "\x00" not in ref


def _codenames(role: Role) -> list[str]:
    if role == Role.ADMIN:
        return [ROLE_PERMISSIONS[Role.ADMIN]]
    return [ROLE_PERMISSIONS[Role.STAFF], ROLE_PERMISSIONS[Role.ADMIN]]


def _grants(user, codenames: list[str], clinic=None):
    """Subqueries of clinic ids where ``user`` holds one of ``codenames`` (directly or via a group)."""
    perm = {"permission__codename__in": codenames, "permission__content_type__app_label": "scheduling"}
    direct = ClinicUserObjectPermission.objects.filter(user=user, **perm)
    grouped = ClinicGroupObjectPermission.objects.filter(group__user=user, **perm)
    if clinic is not None:
        direct = direct.filter(content_object=clinic)
        grouped = grouped.filter(content_object=clinic)
    return direct, grouped


def clinics_for_user(user, role: Role = Role.STAFF) -> QuerySet[Clinic]:
    if not getattr(user, "is_authenticated", False):
        return Clinic.objects.none()
    direct, grouped = _grants(user, _codenames(role))
    return Clinic.objects.filter(
        Q(pk__in=direct.values("content_object")) | Q(pk__in=grouped.values("content_object"))
    ).select_related("tenant_group")


#: The clinic and the caller's codenames there, one statement compiled once per process (issue 15: the
#: ORM spent ~1 ms of Python per API request compiling it).
_CLINIC_WITH_CODENAMES: PreparedQuery[Clinic] = PreparedQuery(
    lambda user_id, ref: (
        Clinic.objects.select_related("tenant_group")
        .annotate(codenames=queries.clinic_codenames(user_id))
        .filter(ref=ref)
        .order_by("pk")[:1]
    ),
    int,
    str,
)


def clinic_for_user(user, clinic_ref: str | None, *, role: Role = Role.STAFF, operate: bool = False) -> Clinic:
    """The clinic named by ``clinic_ref`` if the user works there; 404 otherwise, 403 if the role is too low.

    ``operate=True`` (ADMIN commands) also needs the separate "operate" grant (``operate_clinic``):
    the ADMIN role alone reads. The returned clinic carries ``user_role`` (the highest role the user
    holds there) and ``user_can_operate``.
    """
    if not getattr(user, "is_authenticated", False) or not _plausible_ref(clinic_ref):
        raise NotFound()
    # Any: the row carries the ``codenames`` annotation and gets ``user_role``/``user_can_operate``.
    clinic: Any = _CLINIC_WITH_CODENAMES.first(user.pk, clinic_ref)
    codenames = set(clinic.codenames) if clinic is not None else set()
    is_admin = ROLE_PERMISSIONS[Role.ADMIN] in codenames
    if clinic is None or not (is_admin or ROLE_PERMISSIONS[Role.STAFF] in codenames):
        raise NotFound()
    clinic.user_role = Role.ADMIN if is_admin else Role.STAFF
    clinic.role_user_id = user.pk  # whose role ``user_role`` is (``may_run`` trusts it for this user only)
    clinic.user_can_operate = is_admin and OPERATE_PERMISSION in codenames
    if role == Role.ADMIN and clinic.user_role != Role.ADMIN:
        raise PermissionDenied("This action needs the ADMIN role in this clinic.")
    if operate and not clinic.user_can_operate:
        raise PermissionDenied("This action needs the operate permission in this clinic (ADMIN alone reads).")
    return clinic


def clinic_for_grant(user, clinic_ref: str | None, *, codename: str) -> Clinic:
    """The clinic named by ``clinic_ref`` if ``user`` holds the object permission ``codename`` on it
    (an integration credential such as ``feed_decisions``). A member without it gets 403; anyone
    else 404, exactly like a missing clinic."""
    if not getattr(user, "is_authenticated", False) or not isinstance(clinic_ref, str):
        raise NotFound()
    clinic = Clinic.objects.select_related("tenant_group").filter(ref=clinic_ref).first()
    if clinic is None:
        raise NotFound()
    direct, grouped = _grants(user, [codename], clinic)
    if direct.exists() or grouped.exists():
        return clinic
    member_direct, member_grouped = _grants(user, _codenames(Role.STAFF), clinic)
    if member_direct.exists() or member_grouped.exists():
        raise PermissionDenied("This feed needs the clinic's integration credential.")
    raise NotFound()


def user_is_admin(user, clinic: Clinic) -> bool:
    direct, grouped = _grants(user, _codenames(Role.ADMIN), clinic)
    return direct.exists() or grouped.exists()


#: Who may run each clinic command. Each app writes its own commands' roles once, beside its commands, and
#: registers them at ``ready()`` (``command_roles_register``: waitlist/roles.py, reevaluation/roles.py); these
#: are scheduling's. The API views (``required_role``), the console (``clinic_view`` and its buttons) and the
#: management commands read the table; services that check the role themselves (``require_command_role``)
#: read it too. Destructive commands (the patient or the clinic loses something) are ADMIN.
COMMAND_ROLES: dict[str, Role] = {
    "patient_create": Role.STAFF,
    "consent_record": Role.STAFF,
    "appointment_book": Role.STAFF,
    "appointment_cancel": Role.STAFF,
    # where the clinic's integration may send (the webhook URL, the egress allowlist: issue 43)
    "clinic_integration_set": Role.ADMIN,
}


def command_roles_register(roles: dict[str, Role]) -> None:
    """Add an app's commands; a command registered twice with another role is a programming error."""
    for command, role in roles.items():
        if COMMAND_ROLES.setdefault(command, role) != role:
            raise ValueError(f"{command} is registered as {COMMAND_ROLES[command]} already")


def command_role(command: str) -> Role:
    """The role ``command`` needs (a KeyError for a command nobody registered: fail closed)."""
    return COMMAND_ROLES[command]


def _role_in(user, clinic: Clinic) -> Role | None:
    """The highest role ``user`` holds in ``clinic`` (None: none, or anonymous). A clinic resolved for this user
    by ``clinic_for_user`` carries it already (no query)."""
    if not getattr(user, "is_authenticated", False):
        return None
    if getattr(clinic, "role_user_id", None) == user.pk:
        return Role(clinic.user_role)
    if user_is_admin(user, clinic):
        return Role.ADMIN
    return Role.STAFF if clinics_for_user(user).filter(pk=clinic.pk).exists() else None


def may_run(user, clinic: Clinic, command: str) -> bool:
    """Whether ``user`` holds the role ``command`` needs in ``clinic`` (``COMMAND_ROLES``; a KeyError for an
    unregistered command). The one check behind the API's and the console's roles, the buttons the console
    shows, the management commands and the services that check for themselves. (An ADMIN command's operate
    grant and recent sign-in are the front end's gates on top: ``clinic_for_user(operate=…)``, ``reauth``.)"""
    needed = command_role(command)
    role = _role_in(user, clinic)
    return role is not None and (role == Role.ADMIN or needed == Role.STAFF)


def require_command_role(actor, clinic: Clinic, command: str) -> None:
    """A service's own check, so no front end can forget it: out of scope (or an anonymous or None actor) is the
    404 of a missing clinic; in scope with too low a role is a 403."""
    if _role_in(actor, clinic) is None:
        raise NotFound()
    if not may_run(actor, clinic, command):
        raise PermissionDenied("This action needs the ADMIN role in this clinic.")


def scoped_get(source: type[M] | QuerySet[M], clinic: Clinic, ref, **filters) -> M:
    """Fetch by ref inside ``clinic`` from a model or queryset; a missing or foreign ref is the same 404."""
    if not _plausible_ref(ref) or not ref:
        raise NotFound()
    queryset = source if isinstance(source, QuerySet) else source._default_manager.all()
    obj = queryset.filter(clinic=clinic, ref=ref, **filters).first()
    if obj is None:
        raise NotFound()
    return obj
