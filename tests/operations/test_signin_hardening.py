"""Issue 16 part 1/3: sign-in throttle on the console and /admin/login/ (per user name and per
address, audited), session idle and absolute lifetimes, and sign-in counting without Redis."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from common.models import AuditEntry
from operations.services import ACTION_FAILED, ACTION_THROTTLED
from tests import factories as f

PASSWORD = "pw-for-tests-1"
CLOSED_REDIS = "redis://127.0.0.1:1/0"
pytestmark = pytest.mark.django_db


def console_post(username, password, address="127.0.0.1", client=None):
    return (client or Client()).post(
        reverse("console:login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def admin_post(username, password, address="127.0.0.1", client=None):
    return (client or Client()).post(
        "/admin/login/", {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_admin_login_is_throttled_per_user_name_with_a_clear_message(settings):
    settings.CONSOLE_LOGIN_MAX_FAILURES = 3
    f.UserFactory(username="root", is_staff=True, is_superuser=True)
    for _ in range(3):
        assert admin_post("root", "wrong").status_code == 200
    refused = admin_post("root", PASSWORD)
    assert refused.status_code == 429
    assert b"Too many failed sign-in attempts" in refused.content
    assert "_auth_user_id" not in refused.client.session


def test_password_spraying_across_user_names_is_throttled_per_address(settings):
    settings.CONSOLE_LOGIN_MAX_FAILURES_PER_ADDRESS = 4
    user = f.UserFactory(username="sprayed")
    for i in range(4):
        assert console_post(f"guess-{i}", "Winter2026!", address="198.51.100.7").status_code == 200
    assert console_post(user.username, PASSWORD, address="198.51.100.7").status_code == 429
    assert console_post(user.username, PASSWORD, address="198.51.100.8").status_code == 302


def test_a_lockout_writes_one_audit_row_naming_the_scope(settings):
    settings.CONSOLE_LOGIN_MAX_FAILURES = 2
    for _ in range(2):
        console_post("staff-x", "wrong", address="192.0.2.5")
    console_post("staff-x", "wrong", address="192.0.2.5")  # throttled: not counted, not audited again
    row = AuditEntry.objects.get(action=ACTION_THROTTLED)
    assert row.actor_label == "system:sign-in" and row.clinic_ref == ""
    assert row.result["scope"] == "username" and row.result["address"] == "192.0.2.5"


def test_sign_in_and_its_counting_keep_working_when_redis_is_down(settings):
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": CLOSED_REDIS}}
    settings.CONSOLE_LOGIN_MAX_FAILURES = 2
    user = f.UserFactory(username="no-redis")
    assert console_post(user.username, "wrong").status_code == 200
    assert console_post(user.username, "wrong").status_code == 200
    assert AuditEntry.objects.filter(action=ACTION_FAILED).count() == 2  # PostgreSQL is the counter
    assert console_post(user.username, PASSWORD).status_code == 429
    assert console_post("someone-else", "wrong", address="192.0.2.99").status_code == 200
    other = f.UserFactory(username="fine")
    assert console_post(other.username, PASSWORD, address="192.0.2.100").status_code == 302


def _signed_in_client(user) -> Client:
    client = Client()
    assert console_post(user.username, PASSWORD, client=client).status_code == 302
    return client


def test_a_session_idle_past_the_timeout_is_signed_out(settings):
    settings.SESSION_IDLE_MINUTES = 30
    user = f.UserFactory(username="idle")
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        client = _signed_in_client(user)
        clock.move_to(start + timedelta(minutes=29))
        client.get(reverse("console:index"))
        assert "_auth_user_id" in client.session  # 29 idle minutes: still signed in, clock reset
        clock.move_to(start + timedelta(minutes=29 + 31))
        response = client.get(reverse("console:index"))
    assert response.status_code == 302 and response.url.startswith(reverse("console:login"))
    assert "_auth_user_id" not in client.session


def test_an_active_session_ends_at_its_absolute_lifetime(settings):
    settings.SESSION_IDLE_MINUTES, settings.SESSION_ABSOLUTE_HOURS = 30, 2
    user = f.UserFactory(username="busy")
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        client = _signed_in_client(user)
        for minutes in range(20, 120, 20):  # active every 20 minutes: never idle
            clock.move_to(start + timedelta(minutes=minutes))
            client.get(reverse("console:index"))
            assert "_auth_user_id" in client.session
        clock.move_to(start + timedelta(minutes=121))
        client.get(reverse("console:index"))
    assert "_auth_user_id" not in client.session
