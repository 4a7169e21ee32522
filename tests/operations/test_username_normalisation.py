"""Issue 26 part 1: one normalisation of user names (NFKC, case-folded) for sign-in, the throttle,
re-auth and the token commands; look-alike names share one throttle bucket and cannot be two users."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from common.usernames import canonical_username, user_by_username
from operations.services import login_is_throttled
from tests import factories as f

PASSWORD = "pw-for-tests-1"
LOOK_ALIKES = ["ｏｕｔｓｉｄｅｒ", "outsideｒ", "𝐨𝐮𝐭𝐬𝐢𝐝𝐞𝐫", "OUTSIDER", " Outsider"]
pytestmark = pytest.mark.django_db


def console_post(username, password, address="127.0.0.1"):
    return Client().post(reverse("console:login"), {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.mark.parametrize("spelling", LOOK_ALIKES)
def test_every_look_alike_spelling_has_the_same_canonical_form(spelling):
    assert canonical_username(spelling) == "outsider"


@pytest.mark.parametrize("spelling", LOOK_ALIKES)
def test_a_look_alike_spelling_is_refused_after_the_plain_names_failures(settings, spelling):
    settings.CONSOLE_LOGIN_MAX_FAILURES = 5
    f.UserFactory(username="outsider")
    for i in range(5):
        console_post("outsider", "wrong", address=f"192.0.2.{i + 1}")
    refused = console_post(spelling, PASSWORD, address="198.51.100.1")
    assert refused.status_code == 429
    assert "_auth_user_id" not in refused.client.session


def test_failures_spread_over_look_alikes_lock_the_one_user(settings):
    settings.CONSOLE_LOGIN_MAX_FAILURES = len(LOOK_ALIKES)
    f.UserFactory(username="outsider")
    for i, spelling in enumerate(LOOK_ALIKES):
        assert console_post(spelling, "wrong", address=f"192.0.2.{i + 1}").status_code == 200
    assert login_is_throttled(username="outsider", ip="203.0.113.9")
    assert console_post("outsider", PASSWORD, address="203.0.113.9").status_code == 429


def test_a_look_alike_spelling_signs_in_as_the_one_user_when_not_throttled():
    user = f.UserFactory(username="outsider")
    response = console_post("ｏｕｔｓｉｄｅｒ", PASSWORD)
    assert response.status_code == 302
    assert response.client.session["_auth_user_id"] == str(user.pk)


def test_the_creation_form_refuses_a_look_alike_of_an_existing_user():
    f.UserFactory(username="outsider")
    form = UserCreationForm(data={"username": "outsideｒ", "password1": "x-Long-pw-123", "password2": "x-Long-pw-123"})
    assert not form.is_valid() and "username" in form.errors


def test_a_user_name_must_be_stored_in_its_canonical_form():
    user = get_user_model()(username="Outsider")
    with pytest.raises(ValidationError) as raised:
        user.full_clean(exclude=["password"])
    assert "username" in raised.value.message_dict


def test_the_database_refuses_a_second_user_with_a_look_alike_name():
    f.UserFactory(username="outsider")
    with pytest.raises(IntegrityError), transaction.atomic():
        get_user_model().objects.create(username="ＯＵＴＳＩＤＥＲ")


def test_re_auth_failures_count_against_the_same_bucket_as_sign_in(settings):
    settings.CONSOLE_LOGIN_MAX_FAILURES = 2
    user = f.UserFactory(username="outsider")
    client = Client()
    client.force_login(user)
    for _ in range(2):
        client.post(reverse("console:reauth"), {"password": "wrong"})
    assert console_post("𝐨𝐮𝐭𝐬𝐢𝐝𝐞𝐫", PASSWORD, address="198.51.100.2").status_code == 429


def test_a_name_with_nul_finds_no_user():
    f.UserFactory(username="outsider")
    assert user_by_username("outsider\x00") is None
    assert user_by_username("\ud800") is None


def test_the_token_command_finds_the_user_by_any_spelling():
    user = f.UserFactory(username="outsider")
    Token.objects.create(user=user)
    out = io.StringIO()
    call_command("api_token_revoke", "ｏｕｔｓｉｄｅｒ", stdout=out)
    assert "Revoked 1 token(s) for outsider." in out.getvalue()
    assert not Token.objects.filter(user=user).exists()
