"""``clinic_for_user``: roles held directly or through a group, in one statement (issue 15 part 1)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from guardian.shortcuts import assign_perm

from common.errors import NotFound, PermissionDenied
from scheduling.models import OPERATE_PERMISSION, ROLE_PERMISSIONS, Role
from scheduling.scoping import clinic_for_user
from tests import factories as f

pytestmark = pytest.mark.django_db


def _in_group(clinic, *codenames):
    group = Group.objects.create(name=f"group-{'-'.join(codenames)}")
    for codename in codenames:
        assign_perm(f"scheduling.{codename}", group, clinic)
    user = f.UserFactory()
    user.groups.add(group)
    return user


def test_direct_roles_in_one_statement(clinic, staff, admin):
    with CaptureQueriesContext(connection) as captured:
        as_staff = clinic_for_user(staff, clinic.ref)
        as_admin = clinic_for_user(admin, clinic.ref, role=Role.ADMIN, operate=True)
    assert len(captured) == 2
    assert (as_staff.user_role, as_staff.user_can_operate) == (Role.STAFF, False)
    assert (as_admin.user_role, as_admin.user_can_operate) == (Role.ADMIN, True)
    assert as_admin.tenant_group == clinic.tenant_group


def test_roles_through_a_group_count_like_direct_ones(clinic):
    staff = _in_group(clinic, ROLE_PERMISSIONS[Role.STAFF])
    admin = _in_group(clinic, ROLE_PERMISSIONS[Role.ADMIN], OPERATE_PERMISSION)
    assert clinic_for_user(staff, clinic.ref).user_role == Role.STAFF
    with pytest.raises(PermissionDenied):
        clinic_for_user(staff, clinic.ref, role=Role.ADMIN)
    scoped = clinic_for_user(admin, clinic.ref, role=Role.ADMIN, operate=True)
    assert scoped.user_role == Role.ADMIN and scoped.user_can_operate


def test_admin_without_operate_reads_but_cannot_operate(clinic):
    reader = f.user_with_role(clinic, Role.ADMIN, operate=False)
    assert clinic_for_user(reader, clinic.ref, role=Role.ADMIN).user_can_operate is False
    with pytest.raises(PermissionDenied):
        clinic_for_user(reader, clinic.ref, role=Role.ADMIN, operate=True)


def test_operate_alone_or_another_clinics_role_is_not_membership(clinic, other_tenant_clinic, outsider):
    only_operate = f.UserFactory()
    assign_perm(f"scheduling.{OPERATE_PERMISSION}", only_operate, clinic)
    for user in (only_operate, outsider):
        with pytest.raises(NotFound):
            clinic_for_user(user, clinic.ref)
    group_elsewhere = _in_group(other_tenant_clinic, ROLE_PERMISSIONS[Role.ADMIN])
    with pytest.raises(NotFound):
        clinic_for_user(group_elsewhere, clinic.ref)
    with pytest.raises(NotFound):
        clinic_for_user(outsider, "cl_missing")
