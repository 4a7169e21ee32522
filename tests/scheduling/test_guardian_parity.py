"""The scoping SQL means what django-guardian means (issue 23, part 4).

``scheduling.scoping`` reads guardian's direct-foreign-key grant tables with its own SQL (one indexed query
per request instead of guardian's checker). For random grants on real rows (users, groups, memberships,
each of the clinic permissions), every user's view through the project's fast path equals guardian's own
answer (``get_objects_for_user``, ``ObjectPermissionChecker``) for every role and clinic: the clinics a
role sees, the role ``clinic_for_user`` resolves, the operate grant, and ``may_run``. Superusers are left
out: the project grants nothing by superuser status, so guardian is asked ``with_superuser=False``.
Real PostgreSQL; each example runs in a savepoint that is rolled back.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from guardian.core import ObjectPermissionChecker
from guardian.shortcuts import assign_perm, get_objects_for_user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import NotFound
from scheduling.models import OPERATE_PERMISSION, ROLE_PERMISSIONS, Role
from scheduling.scoping import COMMAND_ROLES, clinic_for_user, clinics_for_user, may_run
from tests import factories as f

CLINICS, USERS, GROUPS = 3, 3, 2
CODENAMES = (ROLE_PERMISSIONS[Role.STAFF], ROLE_PERMISSIONS[Role.ADMIN], OPERATE_PERMISSION, "feed_decisions")
#: What each role needs in guardian's terms: any of these object permissions on the clinic.
ROLE_PERMS = {
    Role.STAFF: [f"scheduling.{ROLE_PERMISSIONS[Role.STAFF]}", f"scheduling.{ROLE_PERMISSIONS[Role.ADMIN]}"],
    Role.ADMIN: [f"scheduling.{ROLE_PERMISSIONS[Role.ADMIN]}"],
}

#: One command of each role (``may_run`` on a clinic not resolved for the user queries; the rest is the same rule).
ONE_PER_ROLE = [next(c for c, r in COMMAND_ROLES.items() if r == role) for role in Role]

grants = st.lists(
    st.tuples(st.sampled_from(["user", "group"]), st.integers(0, USERS - 1), st.integers(0, CLINICS - 1),
              st.sampled_from(CODENAMES)),
    max_size=12,
)
memberships = st.lists(st.tuples(st.integers(0, USERS - 1), st.integers(0, GROUPS - 1)), max_size=4)


@pytest.fixture
def rows(db):
    return {
        "clinics": [f.ClinicFactory() for _ in range(CLINICS)],
        "users": [f.UserFactory() for _ in range(USERS)],
        "groups": [Group.objects.create(name=f"parity-{i}") for i in range(GROUPS)],
    }


def _guardian(user, role: Role) -> set[int]:
    return set(
        get_objects_for_user(user, ROLE_PERMS[role], klass=f.ClinicFactory._meta.model, any_perm=True,
                             with_superuser=False, accept_global_perms=False).values_list("pk", flat=True)
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(grants=grants, memberships=memberships)
def test_the_scoping_sql_returns_what_guardian_returns(rows, grants, memberships):
    clinics, groups = rows["clinics"], rows["groups"]
    sid = transaction.savepoint()
    try:
        for user_index, group_index in memberships:
            rows["users"][user_index].groups.add(groups[group_index])
        for holder, index, clinic_index, codename in grants:
            target = rows["users"][index] if holder == "user" else groups[index % GROUPS]
            assign_perm(f"scheduling.{codename}", target, clinics[clinic_index])
        for stored in rows["users"]:
            user = type(stored).objects.get(pk=stored.pk)  # no permission cache from an earlier example
            checker = ObjectPermissionChecker(user)
            seen = {role: _guardian(user, role) for role in Role}
            for role in Role:
                assert set(clinics_for_user(user, role).values_list("pk", flat=True)) == seen[role], role
            for clinic in clinics:
                if clinic.pk not in seen[Role.STAFF]:
                    with pytest.raises(NotFound):
                        clinic_for_user(user, clinic.ref)
                    assert not any(may_run(user, clinic, command) for command in ONE_PER_ROLE)
                    continue
                resolved = clinic_for_user(user, clinic.ref)
                admin = clinic.pk in seen[Role.ADMIN]
                assert resolved.user_role == (Role.ADMIN if admin else Role.STAFF)
                assert resolved.user_can_operate == (admin and checker.has_perm(OPERATE_PERMISSION, clinic))
                for command, role in COMMAND_ROLES.items():
                    assert may_run(user, resolved, command) == (clinic.pk in seen[role]), command
                for command in ONE_PER_ROLE:  # the unresolved path asks the database
                    assert may_run(user, clinic, command) == (clinic.pk in seen[COMMAND_ROLES[command]]), command
    finally:
        transaction.savepoint_rollback(sid)
