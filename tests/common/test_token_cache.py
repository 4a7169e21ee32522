"""The API token cache (common/auth.py): one token read per worker and ``API_TOKEN_CACHE_SECONDS``,
revocations seen at once in the same process, within the window elsewhere, always for ADMIN commands."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import time_machine
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.conftest import token_client


def _token_reads(captured) -> int:
    return sum('FROM "authtoken_token"' in q["sql"] for q in captured.captured_queries)


def _revoked_elsewhere(user) -> None:
    """Another worker's revoke: the row goes, no signal reaches this process."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM authtoken_token WHERE user_id = %s", [user.pk])


def test_the_second_request_reads_no_token(staff, clinic):
    client = token_client(staff)
    path = f"/api/v1/clinics/{clinic.ref}/treatments/"
    with CaptureQueriesContext(connection) as first:
        assert client.get(path).status_code == 200
    with CaptureQueriesContext(connection) as second:
        assert client.get(path).status_code == 200
    assert _token_reads(first) == 1 and _token_reads(second) == 0


def test_a_revoke_in_this_process_is_refused_at_once(staff, clinic):
    client = token_client(staff)
    path = f"/api/v1/clinics/{clinic.ref}/treatments/"
    assert client.get(path).status_code == 200
    call_command("api_token_revoke", staff.username, stdout=StringIO())
    assert client.get(path).status_code == 401


def test_a_revoke_elsewhere_is_refused_once_the_window_passes(staff, clinic, settings):
    settings.API_TOKEN_CACHE_SECONDS = 5
    client = token_client(staff)
    path = f"/api/v1/clinics/{clinic.ref}/treatments/"
    with time_machine.travel(timezone.now(), tick=False) as clock:
        assert client.get(path).status_code == 200
        _revoked_elsewhere(staff)
        assert client.get(path).status_code == 200  # still inside this worker's window
        clock.shift(timedelta(seconds=6))
        assert client.get(path).status_code == 401


def test_admin_commands_read_the_token_again(admin, clinic):
    client = token_client(admin)
    assert client.get(f"/api/v1/clinics/{clinic.ref}/treatments/").status_code == 200  # cached now
    _revoked_elsewhere(admin)
    refused = client.post(
        f"/api/v1/clinics/{clinic.ref}/vacancies/vac_missing/close", {"reason": "closing it"}, format="json",
        HTTP_IDEMPOTENCY_KEY="c1",
    )
    assert refused.status_code == 401 and refused.json()["code"] == "NOT_AUTHENTICATED"


def test_a_deactivated_user_is_refused_at_once(staff, clinic):
    client = token_client(staff)
    path = f"/api/v1/clinics/{clinic.ref}/treatments/"
    assert client.get(path).status_code == 200
    staff.is_active = False
    staff.save()
    assert client.get(path).status_code == 401


def test_zero_turns_the_cache_off(staff, clinic, settings):
    settings.API_TOKEN_CACHE_SECONDS = 0
    client = token_client(staff)
    path = f"/api/v1/clinics/{clinic.ref}/treatments/"
    with CaptureQueriesContext(connection) as captured:
        client.get(path)
        client.get(path)
    assert _token_reads(captured) == 2


def test_a_clock_stepped_back_does_not_stretch_an_entry(staff, clinic):
    client = token_client(staff)
    path = f"/api/v1/clinics/{clinic.ref}/treatments/"
    with time_machine.travel(timezone.now() + timedelta(days=1), tick=False):
        assert client.get(path).status_code == 200  # cached "until tomorrow + 5 s"
    _revoked_elsewhere(staff)
    assert client.get(path).status_code == 401  # back today: the entry is not trusted
