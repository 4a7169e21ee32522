"""Claim tokens never reach a log line: the redaction itself and gunicorn's access-log atoms."""

from __future__ import annotations

import logging
from datetime import timedelta
from types import SimpleNamespace

from common.redaction import redact, token_digest
from config.gunicorn_logging import RedactingLogger

TOKEN = "eyJvIjoib2ZyXzEyMyIsImUiOiJ3bGVfNDU2In0:1tXyZa:abcDEF-ghi_jkl"


def test_redact_replaces_the_token_with_its_digest_and_is_idempotent():
    text = f"GET /claim/{TOKEN}/?x=1 HTTP/1.1 ref=https://h/claim/{TOKEN}/"
    once = redact(text)
    assert TOKEN not in once
    assert once.count(f"/claim/{token_digest(TOKEN)}/") == 2
    assert redact(once) == once
    assert redact("GET /console/ HTTP/1.1") == "GET /console/ HTTP/1.1"


def test_every_log_record_is_redacted_where_it_is_made(caplog):
    caplog.set_level(logging.INFO)
    logging.getLogger("anything.at.all").info("opened %s", f"/claim/{TOKEN}/")
    logging.getLogger("django.request").warning("Not Found: %(path)s", {"path": f"/claim/{TOKEN}/"})
    assert TOKEN not in caplog.text
    assert token_digest(TOKEN) in caplog.text


def _access_atoms(path: str, referer: str) -> dict:
    config = SimpleNamespace(
        errorlog="-", loglevel="info", accesslog="-", access_log_format="%(r)s", capture_output=False,
        logconfig=None, logconfig_dict={}, logconfig_json=None, syslog=False, disable_redirect_access_to_syslog=False,
        syslog_addr=None, syslog_prefix=None, syslog_facility="user", user=0, group=0, umask=0,
        statsd_host=None, dogstatsd_tags="",
    )
    logger = RedactingLogger(config)
    environ = {
        "REQUEST_METHOD": "GET", "RAW_URI": path, "PATH_INFO": path, "QUERY_STRING": "",
        "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "HTTP_REFERER": referer,
    }
    response = SimpleNamespace(status="200 OK", headers=[("Content-Type", "text/html")], sent=10)
    request = SimpleNamespace(headers=[("REFERER", referer)])
    return logger.atoms(response, request, environ, timedelta(milliseconds=5))


def test_the_gunicorn_access_log_atoms_carry_no_claim_token():
    atoms = _access_atoms(f"/claim/{TOKEN}/", f"http://h/claim/{TOKEN}/")
    assert not [key for key, value in atoms.items() if isinstance(value, str) and TOKEN in value]
    assert atoms["r"] == f"GET /claim/{token_digest(TOKEN)}/ HTTP/1.1"
    assert token_digest(TOKEN) in atoms["f"] and token_digest(TOKEN) in atoms["{referer}i"]


OPTOUT = "eyJwIjoicGF0XzEyMyJ9:1tXyZa:OPTxyz-abc_def"


def test_an_encoded_claim_path_is_redacted_after_decoding():
    for path in (f"/cl%61im/{TOKEN}/", f"/claim%2F{TOKEN}/", f"/cl%2561im/{TOKEN}/", f"/CLAIM/{TOKEN}/",
                 f"/claim/{TOKEN.replace(':', '%3A')}/", f"/claim/{TOKEN.replace(':', '%253A')}/"):
        line = redact(f'GET {path} HTTP/1.1 "{path}"')
        assert TOKEN not in line and TOKEN.replace(":", "%3A") not in line, path
        assert TOKEN.split(":")[0] not in line, path
        assert token_digest(TOKEN) in line, path


def test_opt_out_tokens_are_redacted_like_claim_tokens():
    line = redact(f"Forbidden (CSRF cookie not set.): /optout/{OPTOUT}/ and /opt%6Fut/{OPTOUT}/")
    assert OPTOUT.split(":")[0] not in line
    assert line.count(token_digest(OPTOUT)) == 2


def test_api_and_scrape_tokens_after_their_scheme_are_redacted():
    key = "0123456789abcdef0123456789abcdef01234567"
    line = redact(f"headers={{'Authorization': 'Token {key}'}} Bearer%20scrape-token-abcdefgh1234")
    assert key not in line and "scrape-token-abcdefgh1234" not in line
    assert token_digest(key) in line
    assert redact(line) == line


def test_lines_without_a_secret_are_left_as_they_are():
    for text in ("GET /console/?q=a%20b HTTP/1.1", "50% done", "token bucket refilled", "/claims/list"):
        assert redact(text) == text


def test_the_gunicorn_access_log_atoms_carry_no_token_of_an_encoded_path():
    path = f"/cl%61im/{TOKEN}/"
    atoms = _access_atoms(path, f"http://h/opt%6Fut/{OPTOUT}/")
    leaked = [key for key, value in atoms.items()
              if isinstance(value, str) and (TOKEN.split(":")[0] in value or OPTOUT.split(":")[0] in value)]
    assert not leaked


def test_the_book_me_automatically_link_is_redacted_like_a_claim_link():
    from common.redaction import redact

    text = redact("GET /standing/eyJzIjoid2xlX2FiYyJ9:1tXyZ:abcdefghijklmnop/ 200")
    assert "eyJzIjoid2xlX2FiYyJ9" not in text and "/standing/sha256:" in text


def test_a_texts_short_link_is_redacted_and_a_console_path_keeps_its_clinic_ref():
    code = "t_eRsx8XLso"
    for line in (f"GET /c/{code} HTTP/1.1", f"Not Found: /c/{code}", f"[text obx_1] http://127.0.0.1:8000/c/{code}",
                 f"GET /%63/{code} HTTP/1.1", f"next=/c/{code}", f"GET /C/{code} HTTP/1.1"):
        text = redact(line)
        assert code not in text and f"/c/{token_digest(code)}".lower() in text.lower(), line
    for line in ("GET /console/c/cl_demo_gangnam/waitlist/ HTTP/1.1",
                 "https://clinic.example/console/c/cl_demo_gangnam/controls/",
                 "GET /api/v1/clinics/cl_x/c/abc HTTP/1.1"):
        assert redact(line) == line  # /c/ inside another path is no short link: the refs stay readable


def test_a_long_hostile_word_is_redacted_in_linear_time():
    """Every log line passes here, and a request's path is the caller's to choose: a 64 KB run of letters (a
    hostile URL) took the short-link rule's scheme alternative 24 s to scan (quadratic); it must stay a scan."""
    import time

    word = "a" * 65536
    started = time.perf_counter()
    assert redact(f"Not Found: /{word}/c/") == f"Not Found: /{word}/c/"
    assert redact(f"{word}://{word}/c/abcd") == f"{word}://{word}/c/{token_digest('abcd')}"
    assert time.perf_counter() - started < 2.0
