"""``manage.py fhir_integration`` issues the EHR's credential: a user with the one object permission, no password,
its token printed; a second run reuses them."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from guardian.shortcuts import get_perms
from rest_framework.authtoken.models import Token

from interop.models import FHIR_INTEGRATION_PERMISSION
from tests import factories as f

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command("fhir_integration", *args, stdout=out)
    return out.getvalue().strip()


def test_the_command_prints_the_token_of_a_user_with_only_the_integration_permission():
    clinic = f.ClinicFactory()
    token = run("--clinic", clinic.ref, "--username", "ehr-bridge")
    user = get_user_model().objects.get(username="ehr-bridge")
    assert Token.objects.get(user=user).key == token and not user.has_usable_password()
    assert get_perms(user, clinic) == [FHIR_INTEGRATION_PERMISSION.split(".")[-1]]
    assert run("--clinic", clinic.ref, "--username", "ehr-bridge") == token


def test_an_unknown_clinic_is_refused():
    with pytest.raises(CommandError):
        run("--clinic", "cl_missing", "--username", "ehr-bridge")
