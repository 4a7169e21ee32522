"""Issue 13 part 5: ADMIN commands need the operate grant and a recent sign-in (console), and API
tokens used for them expire and can be revoked."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from common.models import AuditEntry
from reevaluation.models import ClinicReevaluationSettings
from scheduling.models import Role
from tests import factories as f
from tests.conftest import token_client

PASSWORD = "pw-for-tests-1"
HX = {"HTTP_HX_REQUEST": "true"}
pytestmark = pytest.mark.django_db


def mode_url(clinic) -> str:
    return reverse("console:reevaluation-mode", kwargs={"clinic_ref": clinic.ref})


def page_url(clinic) -> str:
    return reverse("console:reevaluation", kwargs={"clinic_ref": clinic.ref})


def set_mode(client: Client, clinic, key: str = "m1"):
    data = {"mode": "DRY_RUN", "reason": "rollout step 2", "confirm": "on", "idempotency_key": key}
    return client.post(mode_url(clinic), data, HTTP_HX_CURRENT_URL=f"http://testserver{page_url(clinic)}", **HX)


def sign_in(user) -> Client:
    client = Client()
    response = client.post(reverse("console:login"), {"username": user.username, "password": PASSWORD})
    assert response.status_code == 302
    return client


def mode_changes() -> int:
    return AuditEntry.objects.filter(action="reevaluation.mode_set").count()


def test_an_admin_command_after_the_re_auth_window_asks_for_the_password_and_changes_nothing(
    admin, clinic, settings
):
    settings.CONSOLE_REAUTH_MINUTES = 10
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        client = sign_in(admin)
        clock.move_to(start + timedelta(minutes=11))
        response = set_mode(client, clinic)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("console:reauth") + "?next=" + page_url(clinic).replace("/", "%2F")
    assert mode_changes() == 0 and not ClinicReevaluationSettings.objects.filter(clinic=clinic).exists()


def test_re_entering_the_password_lets_the_command_run_again(admin, clinic, settings):
    settings.CONSOLE_REAUTH_MINUTES = 10
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        client = sign_in(admin)
        clock.move_to(start + timedelta(minutes=30))
        assert set_mode(client, clinic).has_header("HX-Redirect")
        wrong = client.post(reverse("console:reauth"), {"password": "nope", "next": page_url(clinic)})
        assert wrong.status_code == 200 and b"That password is not correct." in wrong.content
        right = client.post(reverse("console:reauth"), {"password": PASSWORD, "next": page_url(clinic)})
        assert right.status_code == 302 and right.url == page_url(clinic)
        assert set_mode(client, clinic, key="m2").status_code == 200
    assert mode_changes() == 1


def test_a_fresh_sign_in_runs_the_command_directly(admin, clinic):
    assert set_mode(sign_in(admin), clinic).status_code == 200
    assert mode_changes() == 1


def test_admin_without_the_operate_grant_reads_but_cannot_run_commands(clinic):
    reader = f.user_with_role(clinic, Role.ADMIN, operate=False, username="admin-reader")
    client = sign_in(reader)
    assert client.get(page_url(clinic)).status_code == 200
    refused = set_mode(client, clinic)
    assert refused.status_code == 403 and mode_changes() == 0


# --- API tokens for ADMIN commands -----------------------------------------------------------------


def close_vacancy(client, clinic):
    return client.post(
        f"/api/v1/clinics/{clinic.ref}/vacancies/vac_missing/close",
        {"reason": "closing it"}, format="json", HTTP_IDEMPOTENCY_KEY="c1",
    )


def test_an_old_token_cannot_run_admin_commands_but_still_reads(admin, clinic, settings):
    settings.API_ADMIN_TOKEN_MAX_AGE_HOURS = 24
    client = token_client(admin)
    Token.objects.filter(user=admin).update(created=timezone.now() - timedelta(hours=25))
    refused = close_vacancy(client, clinic)
    assert refused.status_code == 401 and refused.json()["code"] == "TOKEN_EXPIRED"
    assert client.get(f"/api/v1/clinics/{clinic.ref}/treatments/").status_code == 200


def test_a_young_token_reaches_the_admin_command(admin, clinic):
    response = close_vacancy(token_client(admin), clinic)
    assert response.status_code == 404  # past the gate: the (missing) vacancy answers


def test_admin_api_commands_need_the_operate_grant(clinic):
    reader = f.user_with_role(clinic, Role.ADMIN, operate=False, username="api-reader")
    response = close_vacancy(token_client(reader), clinic)
    assert response.status_code == 403 and "operate" in response.json()["detail"]


def test_a_revoked_token_is_refused_and_reissue_prints_a_new_one(admin, clinic):
    client = token_client(admin)
    call_command("api_token_revoke", admin.username, stdout=StringIO())
    assert close_vacancy(client, clinic).status_code == 401
    out = StringIO()
    call_command("api_token_revoke", admin.username, "--reissue", stdout=out)
    new_key = Token.objects.get(user=admin).key
    assert new_key in out.getvalue()
