"""The production guard (issue 16 part 2): ``DJANGO_ENV=production`` refuses to start unsafe.

Each refusal names the setting (or data) that is unsafe. ``refuse_unsafe_production`` runs from
``CommonConfig.ready`` in every process (gunicorn, Celery, manage.py), so nothing starts in
production with a development value; the same findings are a system check (``manage.py check``).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

DEV_SECRET_KEY = "dev-only-insecure-key"
DEMO_WEBHOOK_SECRET = "demo-webhook-secret"
DEMO_HMAC_SECRET = "demo-secret-change-me"
DEMO_CRM_TOKEN = "demo-crm-token"


def _settings_findings() -> list[str]:
    found = []
    if settings.SECRET_KEY == DEV_SECRET_KEY or len(settings.SECRET_KEY) < 32:
        found.append("DJANGO_SECRET_KEY is the development key (or shorter than 32 characters)")
    if getattr(settings, "NOTIFY_WEBHOOK_SECRET", "") in ("", DEMO_WEBHOOK_SECRET):
        found.append("NOTIFY_WEBHOOK_SECRET is the demo webhook secret (or empty)")
    if getattr(settings, "NOTIFY_DEFAULT_PROVIDER", "console") == "console" and not getattr(
        settings, "NOTIFY_ALLOW_CONSOLE_IN_PRODUCTION", False
    ):
        found.append(
            "NOTIFY_DEFAULT_PROVIDER is 'console' (set email or webhook, or NOTIFY_ALLOW_CONSOLE_IN_PRODUCTION=true)"
        )
    if getattr(settings, "CRM_STUB_ENABLED", False) or "/crm-stub" in getattr(settings, "CRM_BASE_URL", ""):
        found.append("CRM_STUB_ENABLED / CRM_BASE_URL: the demo CRM stub is enabled or targeted")
    if getattr(settings, "TWILIO_AUTH_TOKEN", "") == "demo-twilio-token":
        found.append("TWILIO_AUTH_TOKEN is the demo token")
    if not _https_without_credentials(getattr(settings, "TWILIO_API_BASE_URL", "")):
        found.append("TWILIO_API_BASE_URL is not an https URL without user:password@ (empty: Twilio's own)")
    if getattr(settings, "CRM_API_TOKEN", "") == DEMO_CRM_TOKEN:
        found.append("CRM_API_TOKEN is the demo token")
    if any(str(item).split(":")[1:2] == [DEMO_HMAC_SECRET] for item in settings.REEVALUATION_HMAC_KEYS):
        found.append("REEVALUATION_HMAC_KEYS contains the demo secret")
    if getattr(settings, "EGRESS_ALLOW_HTTP", False):
        # Subscription endpoints and webhook URLs carry patients' appointments: https only (common/egress.py).
        found.append("EGRESS_ALLOW_HTTP is on: a clinic's integration targets are https only in production")
    return found


def _https_without_credentials(url: str) -> bool:
    """Empty (the library's own https://api.twilio.com), or an https URL with a host and no ``user:password@``.

    The Twilio library sends the account sid and auth token (HTTP basic auth) and every text's number and words
    to this base: over plain http they would cross the network readable. It is the operator's setting, never a
    clinic's, so it is not put through the clinic egress guard (``common.egress``, which refuses private
    addresses a staging mock may well use); production refuses anything but https instead."""
    if not url:
        return True
    try:
        parts = urlsplit(url)
        return parts.scheme == "https" and bool(parts.hostname) and parts.username is None and parts.password is None
    except ValueError:
        return False


#: Each app's check of its own data, ``() -> str | None`` (what it found unsafe), registered at the app's
#: ``ready()`` (``data_check_register``): the ground floor imports no app.
DATA_CHECKS: list[Callable[[], str | None]] = []


def data_check_register(check: Callable[[], str | None]) -> None:
    if check not in DATA_CHECKS:
        DATA_CHECKS.append(check)


def _data_findings() -> list[str]:
    """What each app's data check finds unsafe (e.g. scheduling's demo users with their published passwords)."""
    return [finding for check in DATA_CHECKS if (finding := check())]


def production_findings(*, include_database: bool = True) -> list[str]:
    """Every unsafe value for production; empty when ``DJANGO_ENV`` is not production."""
    if not getattr(settings, "PRODUCTION", False):
        return []
    found = _settings_findings()
    if include_database:
        found += _data_findings()
    return found


@checks.register(checks.Tags.security, deploy=False)
def production_guard(app_configs=None, **kwargs):
    return [
        checks.Critical(f"Unsafe for production: {finding}.", id="common.E001")
        for finding in production_findings()
    ]


def refuse_unsafe_production() -> None:
    found = production_findings()
    if found:
        raise ImproperlyConfigured(
            "DJANGO_ENV=production refuses to start: " + "; ".join(found) + ". See docs/security.md."
        )
