"""A developer machine (``make run``, ``manage.py``, the benchmarks and the simulator): the shared settings with
development defaults for every secret, each one public and refused by the production guard (common/checks.py)."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import env

if env("DJANGO_ENV", default="development") == "production":
    raise ImproperlyConfigured(
        "DJANGO_ENV=production with the development settings: set DJANGO_SETTINGS_MODULE=config.settings.production"
    )

# Development: seed_demo and the demo sign-ins are allowed, the production guard checks nothing.
PRODUCTION = False
SECRET_KEY = env("DJANGO_SECRET_KEY", default="dev-only-insecure-key")
# CRM → service signed events (HMAC-SHA256 over the raw body). Several keys at once allow rotation:
# "key_id:secret,key_id2:secret2".
REEVALUATION_HMAC_KEYS = env.list("REEVALUATION_HMAC_KEYS", default=["demo:demo-secret-change-me"])
CRM_API_TOKEN = env("CRM_API_TOKEN", default="demo-crm-token")
# The demo CRM stub at /crm-stub/ (CRM_BASE_URL's default points at it).
CRM_STUB_ENABLED = env.bool("CRM_STUB_ENABLED", default=True)
# The demo's inbound text webhook checks signatures with this token (``manage.py texts_signed_curl`` signs with it).
TWILIO_AUTH_TOKEN = env("TWILIO_AUTH_TOKEN", default="demo-twilio-token")
# "scope:token" entries; scope "*" sees every clinic, a tenant group ref only that group's clinics.
METRICS_SCRAPE_TOKENS = env.list("METRICS_SCRAPE_TOKENS", default=["*:demo-metrics-token"])
# Plain http to a clinic's integration targets (a loopback FHIR subscriber, the demo's webhook).
EGRESS_ALLOW_HTTP = env.bool("EGRESS_ALLOW_HTTP", default=True)
