"""Issue 16 part 2: DJANGO_ENV=production refuses to start with each unsafe value, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from common.checks import production_findings, refuse_unsafe_production
from scheduling.demo import DEMO_USERS
from tests import factories as f

ROOT = Path(__file__).resolve().parents[2]
SAFE = {
    "SECRET_KEY": "x" * 50,
    "NOTIFY_WEBHOOK_SECRET": "a-real-webhook-secret",
    "NOTIFY_DEFAULT_PROVIDER": "webhook",
    "NOTIFY_ALLOW_CONSOLE_IN_PRODUCTION": False,
    "CRM_STUB_ENABLED": False,
    "CRM_BASE_URL": "https://crm.example/api",
    "CRM_API_TOKEN": "a-real-crm-token",
    "REEVALUATION_HMAC_KEYS": ["crm1:a-real-hmac-secret:tg_live"],
    "TWILIO_AUTH_TOKEN": "",  # production's default: no clinic texts
    "EGRESS_ALLOW_HTTP": False,
}


@pytest.fixture
def production(settings):
    settings.PRODUCTION = True
    for name, value in SAFE.items():
        setattr(settings, name, value)
    return settings


def test_safe_production_settings_start(production, db):
    assert production_findings() == []
    refuse_unsafe_production()  # no exception


def test_development_is_never_refused(settings, db):
    settings.PRODUCTION = False
    settings.SECRET_KEY = "dev-only-insecure-key"
    assert production_findings() == []


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("SECRET_KEY", "dev-only-insecure-key", "DJANGO_SECRET_KEY"),
        ("NOTIFY_WEBHOOK_SECRET", "demo-webhook-secret", "NOTIFY_WEBHOOK_SECRET"),
        ("NOTIFY_DEFAULT_PROVIDER", "console", "NOTIFY_DEFAULT_PROVIDER"),
        ("CRM_STUB_ENABLED", True, "CRM_STUB_ENABLED"),
        ("CRM_BASE_URL", "http://127.0.0.1:8000/crm-stub", "CRM_BASE_URL"),
        ("CRM_API_TOKEN", "demo-crm-token", "CRM_API_TOKEN"),
        ("REEVALUATION_HMAC_KEYS", ["demo:demo-secret-change-me"], "REEVALUATION_HMAC_KEYS"),
        ("EGRESS_ALLOW_HTTP", True, "EGRESS_ALLOW_HTTP"),  # issue 43: https only in production
    ],
)
def test_each_unsafe_value_is_refused_by_name(production, db, setting, value, named):
    setattr(production, setting, value)
    with pytest.raises(ImproperlyConfigured, match=named):
        refuse_unsafe_production()


def test_the_console_provider_is_allowed_only_explicitly(production, db):
    production.NOTIFY_DEFAULT_PROVIDER = "console"
    production.NOTIFY_ALLOW_CONSOLE_IN_PRODUCTION = True
    assert production_findings() == []


def test_demo_users_with_demo_passwords_are_refused(production, db):
    f.UserFactory(username="admin", password=DEMO_USERS["admin"][0])
    with pytest.raises(ImproperlyConfigured, match="demo users"):
        refuse_unsafe_production()


def test_a_real_admin_account_named_admin_is_not_a_demo_user(production, db):
    f.UserFactory(username="admin", password="a long and real password")
    assert production_findings() == []


def _start(code: str = "print('started')", **overrides) -> subprocess.CompletedProcess:
    env = {
        # Not the suite's own egress allowance (tests/conftest.py): production's defaults are what is checked.
        **{name: value for name, value in os.environ.items() if not name.startswith("EGRESS_")},
        "DJANGO_ENV": "production",
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": SAFE["SECRET_KEY"],
        "NOTIFY_WEBHOOK_SECRET": SAFE["NOTIFY_WEBHOOK_SECRET"],
        "NOTIFY_DEFAULT_PROVIDER": "webhook",
        "CRM_API_TOKEN": SAFE["CRM_API_TOKEN"],
        "CRM_BASE_URL": SAFE["CRM_BASE_URL"],
        "REEVALUATION_HMAC_KEYS": "crm1:a-real-hmac-secret",
        # No database to look at: the settings alone decide.
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/none",
        **overrides,
    }
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )


def test_a_process_starting_in_production_with_the_dev_key_refuses_and_names_it():
    assert _start().stdout.strip() == "started"
    refused = _start(DJANGO_SECRET_KEY="dev-only-insecure-key")
    assert refused.returncode != 0 and "started" not in refused.stdout
    assert "ImproperlyConfigured" in refused.stderr and "DJANGO_SECRET_KEY" in refused.stderr


@pytest.mark.parametrize("url", ["http://twilio-mock.staging.example", "https://AC1:token@twilio-mock.example",
                                 "ftp://twilio-mock.example", "https://", "twilio-mock.example"])
def test_a_twilio_base_url_that_is_not_plain_https_is_refused(production, db, url):
    production.TWILIO_API_BASE_URL = url
    with pytest.raises(ImproperlyConfigured, match="TWILIO_API_BASE_URL"):
        refuse_unsafe_production()


@pytest.mark.parametrize("url", ["", "https://twilio-mock.staging.example", "https://10.0.4.2:8443/"])
def test_twilios_own_base_or_an_https_one_is_allowed(production, db, url):
    production.TWILIO_API_BASE_URL = url
    assert production_findings() == []


def test_the_demo_twilio_token_is_refused(production, settings):
    settings.TWILIO_AUTH_TOKEN = "demo-twilio-token"
    assert "TWILIO_AUTH_TOKEN is the demo token" in production_findings(include_database=False)


def test_a_production_process_sends_to_https_only_and_refuses_to_start_with_plain_http_on():
    """Issue 43: a clinic's subscription endpoints and webhook URL are https only in production: off by default,
    and a deployment that turns plain http on does not start."""
    started = _start("from django.conf import settings; print('http', settings.EGRESS_ALLOW_HTTP)")
    assert started.stdout.strip() == "http False", started.stderr
    refused = _start(EGRESS_ALLOW_HTTP="true")
    assert refused.returncode != 0 and "EGRESS_ALLOW_HTTP" in refused.stderr
