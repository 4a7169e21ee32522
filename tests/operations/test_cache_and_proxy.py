"""Issue 26 part 7: signed-in console pages are never stored; production believes the proxy's
X-Forwarded-Proto (docs/deployment.md), so behind TLS Django sees HTTPS."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", ["", "waitlist/", "waitlist/lists/vacancies/", "audit/", "controls/"])
def test_a_signed_in_console_page_is_no_store(admin, clinic, page):
    client = Client()
    client.force_login(admin)
    response = client.get(f"/console/c/{clinic.ref}/{page}")
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]


def test_the_list_poll_keeps_its_revalidation_directive(admin, clinic):
    client = Client()
    client.force_login(admin)
    response = client.get(f"/console/c/{clinic.ref}/waitlist/lists/vacancies/", HTTP_X_CONSOLE_POLL="1")
    directives = {d.strip() for d in response["Cache-Control"].split(",")}
    assert {"no-store", "private", "no-cache"} <= directives


def _production_settings(**extra) -> str:
    env = {
        **os.environ, "DJANGO_ENV": "production", "DJANGO_SECRET_KEY": "x" * 50,
        "REEVALUATION_HMAC_KEYS": "k:secret", "CRM_API_TOKEN": "t", "METRICS_SCRAPE_TOKENS": "*:t", **extra,
    }
    code = (
        "import config.settings.production as s; print(getattr(s, 'SECURE_PROXY_SSL_HEADER', None)); "
        "print(s.USE_X_FORWARDED_HOST)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_production_trusts_the_proxys_forwarded_proto():
    assert _production_settings() == "('HTTP_X_FORWARDED_PROTO', 'https')\nFalse\n"


def test_the_proxy_header_can_be_turned_off():
    assert _production_settings(DJANGO_SECURE_PROXY_SSL_HEADER="").startswith("None\n")


def test_behind_the_proxy_a_request_is_secure(settings, rf):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert rf.get("/", HTTP_X_FORWARDED_PROTO="https").is_secure()
    assert not rf.get("/").is_secure()
