"""Each app registers its commands' roles at ready(); the registry refuses a second, different role."""

import pytest

from scheduling.models import Role
from scheduling.scoping import COMMAND_ROLES, command_role, command_roles_register


def test_every_app_registers_its_commands_at_ready():
    assert command_role("appointment_cancel") == Role.STAFF
    assert command_role("offer_withdraw") == Role.ADMIN
    assert command_role("redrive_execute") == Role.ADMIN


def test_registering_a_command_again_with_another_role_is_refused():
    with pytest.raises(ValueError):
        command_roles_register({"offer_withdraw": Role.STAFF})
    assert COMMAND_ROLES["offer_withdraw"] == Role.ADMIN


def test_registering_the_same_role_again_is_harmless():
    command_roles_register({"offer_withdraw": Role.ADMIN})
    assert COMMAND_ROLES["offer_withdraw"] == Role.ADMIN
