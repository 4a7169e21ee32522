"""The deployment (``DJANGO_ENV=production``, docs/deployment.md): no secret has a default, cookies are secure,
HSTS is on, and the TLS-terminating proxy's X-Forwarded-Proto is trusted. Every process (gunicorn, Celery,
``manage.py``) also refuses to start with a development value or demo data (common/checks.py)."""

from .base import *  # noqa: F403
from .base import env

# seed_demo refuses, the production guard (common/checks.py) runs in every process.
PRODUCTION = True
SECRET_KEY = env("DJANGO_SECRET_KEY")
# CRM → service signed events (HMAC-SHA256 over the raw body). Several keys at once allow rotation:
# "key_id:secret,key_id2:secret2".
REEVALUATION_HMAC_KEYS = env.list("REEVALUATION_HMAC_KEYS")
CRM_API_TOKEN = env("CRM_API_TOKEN")
# The demo CRM stub at /crm-stub/ (the production guard refuses it).
CRM_STUB_ENABLED = env.bool("CRM_STUB_ENABLED", default=False)
# Twilio's auth token signs the inbound text webhook (texts need it; empty: texts off).
TWILIO_AUTH_TOKEN = env("TWILIO_AUTH_TOKEN", default="")
# "scope:token" entries; scope "*" sees every clinic, a tenant group ref only that group's clinics. None: /metrics
# answers 401 to every scrape.
METRICS_SCRAPE_TOKENS = env.list("METRICS_SCRAPE_TOKENS", default=[])
# A clinic's integration targets are https only: read so that the production guard (common/checks.py) can refuse
# a deployment that turns plain http on, rather than ignore it silently.
EGRESS_ALLOW_HTTP = env.bool("EGRESS_ALLOW_HTTP", default=False)

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 30)
# Behind the TLS-terminating proxy of docs/deployment.md, which sets X-Forwarded-Proto (overwriting any
# the client sent) and forwards Host: Django sees HTTPS (secure cookies, CSRF origin, HSTS, redirects).
# "" turns it off (a deployment where gunicorn itself terminates TLS).
_proxy_ssl_header = env("DJANGO_SECURE_PROXY_SSL_HEADER", default="X-Forwarded-Proto")
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)
# Only for a proxy that rewrites Host (the documented one forwards it, so this stays off).
USE_X_FORWARDED_HOST = env.bool("DJANGO_USE_X_FORWARDED_HOST", default=False)
