"""`make run`'s output: sign-ins last after "Ready", failures labelled, console polls not access-logged."""

from __future__ import annotations

from config.gunicorn_logging import is_console_poll
from devtools.launcher import ready_banner, sign_in_lines

SEED_OUTPUT = "Demo data ready.\n  staff     / pw   STAFF at Gangnam\n  API token for staff: abc123\n"


def test_seed_output_splits_progress_from_sign_ins():
    progress, sign_ins = sign_in_lines(SEED_OUTPUT)
    assert progress == "Demo data ready."
    assert "staff" in sign_ins and "abc123" in sign_ins and "Demo data ready" not in sign_ins


def test_ready_banner_starts_with_ready_and_lists_urls_sign_ins_and_deliberate_failures():
    banner = ready_banner("http://127.0.0.1:8000", sign_in_lines(SEED_OUTPUT)[1])
    lines = banner.strip().splitlines()
    assert lines[0] == "Ready."
    assert "http://127.0.0.1:8000/api/v1/" in banner and "API token for staff: abc123" in banner
    assert "Deliberate demo failures" in banner


def test_console_polls_are_not_access_logged_but_commands_are():
    assert is_console_poll({"REQUEST_METHOD": "GET", "HTTP_X_CONSOLE_POLL": "1"}, "200 OK")
    assert is_console_poll({"REQUEST_METHOD": "GET"}, "304 Not Modified")
    assert not is_console_poll({"REQUEST_METHOD": "GET"}, "200 OK")
    assert not is_console_poll({"REQUEST_METHOD": "POST", "HTTP_X_CONSOLE_POLL": "1"}, "200 OK")


def test_run_env_carries_the_public_base_url_so_printed_claim_links_use_the_running_port():
    from devtools.launcher import run_env_text

    env = {"DATABASE_URL": "postgres://x", "PUBLIC_BASE_URL": "http://127.0.0.1:8765", "OTHER": "no"}
    text = run_env_text(env, "127.0.0.1", "8765")
    assert "PUBLIC_BASE_URL=http://127.0.0.1:8765\n" in text
    assert "DEMO_BASE_URL=http://127.0.0.1:8765\n" in text and "OTHER" not in text


def test_ready_banner_promises_no_waitlist_review_rows_the_demo_does_not_seed():
    banner = ready_banner("http://127.0.0.1:8000", "")
    assert "staff review" not in banner and "error lines above" not in banner
