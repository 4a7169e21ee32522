"""Settings every environment shares, read from the environment (django-environ).

``local.py`` (``make run``, ``manage.py`` on a developer machine), ``test.py`` (pytest) and ``production.py``
(``DJANGO_ENV=production``: the deployment) import this and add only what differs between them: the secrets and
demo values (development defaults, none in production) and production's cookie and proxy hardening. Each
setting is written once, here or in one of those. Which module a process loads: ``config/settings/__init__.py``.
"""

from pathlib import Path
from typing import Any

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# --- Django core ------------------------------------------------------------------------------------------

DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "django_htmx",
    "template_partials",
    "common",
    "scheduling",
    "waitlist",
    "reevaluation",
    "operations",
    # /metrics, /healthz, /readyz, correlation ids and JSON logs (docs/deployment.md, docs/runbook.md).
    "observability",
    "interop",
    # Cross-site browser calls to the public join contract only (issue 40, CORS_* below).
    "corsheaders",
]

# Replica reads (common/replica.py, docs/deployment.md "Replica reads"): off unless REPLICA_DATABASE_URL is set
# (e.g. both PgBouncers with target_session_attrs=prefer-standby, so a lost standby means reads on the primary).
REPLICA_DATABASE_URL = env("REPLICA_DATABASE_URL", default="")

MIDDLEWARE = [
    # Outermost: the correlation id is bound before anything logs; latency covers the whole stack.
    "observability.correlation.CorrelationIdMiddleware",
    "observability.metrics.RequestLatencyMiddleware",
    # A request whose database connection broke: replayed once if safe, else 503 + Retry-After (common/dbloss.py).
    "common.dbloss.DatabaseUnavailableMiddleware",
    # A browser that wrote reads the primary for a while, the rest of REPLICA_READ_VIEWS the replica.
    *(["common.replica.ReplicaReadsMiddleware"] if REPLICA_DATABASE_URL else []),
    "django.middleware.security.SecurityMiddleware",
    "common.middleware.JunkRequestMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    # Before CommonMiddleware, as django-cors-headers asks (the public join contract's preflights).
    "corsheaders.middleware.CorsMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Sessions end after SESSION_IDLE_MINUTES idle and SESSION_ABSOLUTE_HOURS in all (issue 16).
    "operations.middleware.SessionLifetimeMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # The staff console's Content-Security-Policy (CONSOLE_CSP).
    "operations.middleware.ContentSecurityPolicyMiddleware",
    # Signed-in console pages: Cache-Control no-store (issue 26).
    "operations.middleware.SignedInNoStoreMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
            ],
        },
    }
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- PostgreSQL -------------------------------------------------------------------------------------------

_DATABASE_OPTIONS = {
    "ATOMIC_REQUESTS": False,
    # Persistent connections save a connect per request in the web tier (`make run` sets 300).
    "CONN_MAX_AGE": env.int("DATABASE_CONN_MAX_AGE", default=0),
    "CONN_HEALTH_CHECKS": env.bool("DATABASE_CONN_HEALTH_CHECKS", default=True),
    # Behind PgBouncer in transaction pooling mode a server-side cursor cannot outlive its transaction.
    "DISABLE_SERVER_SIDE_CURSORS": env.bool("DATABASE_POOLER_TRANSACTION_MODE", default=False),
}
DATABASES = {
    "default": {
        **env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/clinic_waitlist"),
        **_DATABASE_OPTIONS,
    },
    **(
        {"replica": {**env.db_url_config(REPLICA_DATABASE_URL), **_DATABASE_OPTIONS, "TEST": {"MIRROR": "default"}}}
        if REPLICA_DATABASE_URL
        else {}
    ),
}
DATABASE_ROUTERS = ["common.replica.ReplicaRouter"] if REPLICA_DATABASE_URL else []
# The lag bound: the replica is read only while it holds every commit acknowledged up to this many seconds ago
# (measured on WAL positions every REPLICA_LAG_CHECK_SECONDS per process); further behind, the primary serves.
REPLICA_MAX_LAG_SECONDS = env.int("REPLICA_MAX_LAG_SECONDS", default=5)
REPLICA_LAG_CHECK_SECONDS = env.float("REPLICA_LAG_CHECK_SECONDS", default=1.0)
# A browser that wrote reads only the primary for this long (at least REPLICA_MAX_LAG_SECONDS: read-your-writes).
REPLICA_PIN_SECONDS = env.int("REPLICA_PIN_SECONDS", default=REPLICA_MAX_LAG_SECONDS)
# The read-only views (GET/HEAD) that may read the replica: the console's lists and figures, FHIR searches, /metrics.
REPLICA_READ_VIEWS = env.list("REPLICA_READ_VIEWS", default=[
    "console:clinic-home", "console:audit", "console:waitlist", "console:waitlist-list", "console:waitlist-vacancy",
    "console:reevaluation", "console:reevaluation-finished", "fhir-slot-search", "fhir-appointment-search",
    "fhir-schedule-search", "metrics",
])
# The Retry-After of the 503 a request gets when its database connection broke (common/dbloss.py).
DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS = env.int("DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS", default=5)

# --- Redis: the cache (throttles, counters, kept figures) -------------------------------------------------

REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")
# Redis behind Sentinel (deploy/cluster/): REDIS_URL and CELERY_BROKER_URL are ``sentinel://host:port/db``
# entries joined by ";", and REDIS_SENTINEL_MASTER names the master the Sentinels watch.
REDIS_SENTINEL_MASTER = env("REDIS_SENTINEL_MASTER", default="")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        # Behind Sentinel, one server: Django would split the URL at ";".
        "LOCATION": [REDIS_URL] if REDIS_URL.startswith("sentinel://") else REDIS_URL,
        "KEY_PREFIX": env("CACHE_KEY_PREFIX", default="cw"),
        **(
            {"OPTIONS": {"pool_class": "common.sentinel.SentinelPool", "socket_connect_timeout": 1.0,
                         "socket_timeout": 2.0}}
            if REDIS_URL.startswith("sentinel://")
            else {}
        ),
    }
}

# --- Sign-in, sessions and client addresses (issue 16, docs/security.md) ----------------------------------

AUTHENTICATION_BACKENDS = [
    "common.auth.CanonicalUsernameBackend",  # ModelBackend by the canonical user name (common/usernames.py)
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None
GUARDIAN_RAISE_403 = False
GUARDIAN_MONKEY_PATCH_USER = False
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/console/login/"
LOGIN_REDIRECT_URL = "/console/"
# X-Forwarded-For is read only when REMOTE_ADDR is one of TRUSTED_PROXIES (addresses or CIDRs), or,
# without that list, from the NUM_PROXIES-th hop from the right. Both off by default.
TRUSTED_PROXIES = env.list("TRUSTED_PROXIES", default=[])
NUM_PROXIES = env.int("NUM_PROXIES", default=0)
# Sessions: signed out after SESSION_IDLE_MINUTES without a request, and SESSION_ABSOLUTE_HOURS
# after signing in whatever the activity (operations.middleware.SessionLifetimeMiddleware).
SESSION_IDLE_MINUTES = env.int("SESSION_IDLE_MINUTES", default=30)
SESSION_ABSOLUTE_HOURS = env.int("SESSION_ABSOLUTE_HOURS", default=12)
SESSION_COOKIE_AGE = SESSION_ABSOLUTE_HOURS * 60 * 60
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# A worker keeps a token → user lookup this long (common/auth.py): a revoked token stops working on
# other workers within it; ADMIN commands always re-read the token. 0 turns the cache off.
API_TOKEN_CACHE_SECONDS = env.int("API_TOKEN_CACHE_SECONDS", default=5)
# API tokens older than this cannot run ADMIN commands (rotate: manage.py api_token_revoke).
API_ADMIN_TOKEN_MAX_AGE_HOURS = env.int("API_ADMIN_TOKEN_MAX_AGE_HOURS", default=24 * 7)
# The patient pages with a bearer token in the path (/claim/, /optout/): requests per client address and
# per token in a fixed window (common/throttling.py page_throttle); over either, a plain 429 page.
PATIENT_PAGE_THROTTLE_RATES = {
    "address": env("PATIENT_PAGE_THROTTLE_ADDRESS", default="60/min"),
    "token": env("PATIENT_PAGE_THROTTLE_TOKEN", default="20/min"),
}
# Issue 43 (common/egress.py, docs/security.md "Outbound requests"): targets a clinic's integration chooses
# (FHIR Subscription endpoints, the webhook URL) are https and public unless allowed. EGRESS_ALLOWLIST: host
# names and CIDRs every clinic may reach (a clinic's own list is set by an ADMIN: manage.py clinic_integration).
# Plain http (EGRESS_ALLOW_HTTP): local.py / production.py.
EGRESS_ALLOWLIST = env.list("EGRESS_ALLOWLIST", default=[])

# --- Languages, time, static files ------------------------------------------------------------------------

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ko", "한국어")]
LOCALE_PATHS = [BASE_DIR / "locale"]
FORMAT_MODULE_PATH = ["config.formats"]  # Korean: 오전/오후 before the clock
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# --- The API (DRF, drf-spectacular) -----------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "common.auth.CachedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["common.parsers.SafeJSONParser"],
    "EXCEPTION_HANDLER": "common.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "common.schema.AppAutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Counters live in the Redis cache; generous by default, tighten per deployment.
    "DEFAULT_THROTTLE_CLASSES": [
        "common.throttling.AnonRateThrottle",
        "common.throttling.UserRateThrottle",
    ],
    # Forwarded headers are trusted only from configured proxies (common/clientaddr.py); DRF's own
    # default (None) would key the anonymous throttle on a client-supplied X-Forwarded-For.
    "NUM_PROXIES": NUM_PROXIES,
    "DEFAULT_THROTTLE_RATES": {
        "anon": env("API_THROTTLE_ANON", default="600/min"),
        "user": env("API_THROTTLE_USER", default="6000/min"),
    },
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Clinic waitlist and reevaluation API",
    "DESCRIPTION": "Refills cancelled slots from a waitlist and reevaluates PROPOSED/HELD appointments.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No deep links in the operation summaries: Swagger UI puts them as links inside the summary's button
    # (axe-core: nested-interactive). templates/drf_spectacular/swagger_ui.html fixes the page's contrast.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    # Operations grouped by app (common/schema.py tags them; these are the groups' descriptions).
    "TAGS": [
        {"name": "discovery", "description": "`GET /api/v1/`: where everything is (no sign-in needed)."},
        {"name": "scheduling", "description": "Clinics, reference data, patients, contact consent, appointments."},
        {"name": "waitlist", "description": "Waitlist entries, vacancies, offers and claims, holds and booking, the "
                                            "decision feed, operator controls, policy and shadow policy."},
        {"name": "reevaluation", "description": "CRM assessment-change intake (HMAC-signed) and the reevaluation "
                                                "snapshot and redrive."},
        {"name": "operations", "description": "Operator reads and commands: `/api/v1/ops/…` snapshots and redrive. "
                                              "ADMIN commands need the `operate_clinic` grant and a young token."},
        {"name": "fhir", "description": "FHIR R4 server (interop): see its `metadata` and docs/fhir.md."},
        {"name": "observability", "description": "Probes and Prometheus metrics (docs/deployment.md)."},
    ],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "common.schema.add_observability_paths",
    ],
    # One schema name per shared choice set (the policy's two actions, consent channels).
    "ENUM_NAME_OVERRIDES": {
        "NonFreshActionEnum": "waitlist.models.NonFreshAction",
        "ContactChannelEnum": "scheduling.models.ContactChannel",
    },
}

# --- Logging ----------------------------------------------------------------------------------------------

# "json" (the deployment) or "plain"; both carry the request's correlation id.
LOG_FORMAT = env("LOG_FORMAT", default="plain")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        # ``defaults``: a handler without the correlation filter still formats (an empty id).
        "plain": {
            "()": "logging.Formatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s [%(correlation_id)s] %(message)s",
            "defaults": {"correlation_id": ""},
        },
        "json": {"()": "observability.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["correlation", "backoff"],
        },
    },
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    # Beat ticks every few seconds; per-task "received/succeeded" lines would drown the useful ones.
    "loggers": {
        name: {"level": env("CELERY_TASK_LOG_LEVEL", default="WARNING")}
        for name in ("celery.app.trace", "celery.worker.strategy", "celery.beat")
    },
    "filters": {
        "correlation": {"()": "observability.logs.CorrelationFilter"},
        # Reconnect warnings of workers and beat back off instead of a traceback per retry.
        "backoff": {"()": "observability.logs.RepeatBackoffFilter"},
    },
}

# --- Celery -----------------------------------------------------------------------------------------------

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "maintenance"
CELERY_TIMEZONE = "UTC"
# Workers log through LOGGING above (JSON included), not Celery's own root handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# A broker that cannot be reached answers within a second: the request's commit stands and
# reconcile picks the follow-up up (common/effects.py after_commit).
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
# Late acknowledgement (CELERY_TASK_ACKS_LATE above) with a visibility timeout that fits the tasks: a pool
# process that dies mid-task has its message put back at once (reject on worker lost); a whole worker that
# dies leaves it unacknowledged, and any live or restarted worker restores it once it is older than the
# visibility timeout (swept every few seconds). Every task is bounded well below it (CELERY_TASK_TIME_LIMIT),
# so a live worker's task is never handed out twice; a repeat after a crash is harmless (the services' fences).
CELERY_VISIBILITY_TIMEOUT_SECONDS = env.int("CELERY_VISIBILITY_TIMEOUT_SECONDS", default=120)
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# A worker that loses the broker stops the late-acknowledged tasks it runs: they cannot be acknowledged on
# that connection, and the broker hands them out again (Celery 6's default, said here to keep it).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=max(1, CELERY_VISIBILITY_TIMEOUT_SECONDS * 3 // 4))
# Celery's Django fixup closes the database connection after every task unless this is set: each dispatch and
# delivery then paid a new PostgreSQL backend and re-prepared its statements (a tenth of the worker's samples in
# the storm benchmark, issue 27). With it, a pool process keeps its connection for up to twice this many tasks;
# ``config.celery`` still drops one that is broken or older than CONN_MAX_AGE before each task (the hard time
# limit kills a stuck process with its connection, so no task is interrupted mid-query and its connection kept).
# At 200 a storm's pool process reconnected every few seconds, and each new connection planned the hot path's
# prepared statements again (a third of PostgreSQL's planning time in the full storm).
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=5000)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 2,
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT_SECONDS,
    "unacked_restore_interval": env.float("CELERY_UNACKED_RESTORE_INTERVAL_SECONDS", default=2.0),
    "unacked_restore_throttle": 1,
    # The restore sweep's mutex outlives a worker killed while holding it by this long at most.
    "unacked_mutex_expire": 30,
    # Several deployments (or the scale-out test) sharing one Redis keep their queues apart by a key prefix.
    **(
        {"global_keyprefix": env("CELERY_BROKER_KEY_PREFIX")}
        if env("CELERY_BROKER_KEY_PREFIX", default="")
        else {}
    ),
    # kombu's Sentinel transport (a sentinel:// CELERY_BROKER_URL) asks the Sentinels for this master.
    **(
        {"master_name": REDIS_SENTINEL_MASTER,
         "sentinel_kwargs": {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}}
        if REDIS_SENTINEL_MASTER
        else {}
    ),
}
# Automatic bookings not acknowledged are looked at this often (WAITLIST_ACK_* below).
WAITLIST_ACK_EVERY_SECONDS = env.int("WAITLIST_ACK_EVERY_SECONDS", default=60)
# Beat's entries and the tasks' queues are registered by the apps that own the tasks (common/taskwiring.py, each
# app's ``apps.py``); the intervals an operator may tune are settings (below). Seconds between two sends:
WAITLIST_EXPIRE_EVERY_SECONDS = env.float("WAITLIST_EXPIRE_EVERY_SECONDS", default=30.0)
WAITLIST_RECONCILE_EVERY_SECONDS = env.float("WAITLIST_RECONCILE_EVERY_SECONDS", default=60.0)
# FHIR subscriptions (docs/fhir.md): captured changes → outbox messages every few seconds.
FHIR_SUBSCRIPTION_FANOUT_EVERY_SECONDS = env.float("FHIR_SUBSCRIPTION_FANOUT_EVERY_SECONDS", default=5.0)
# Beat entries sent at once when beat's first send after a broker outage succeeds (observability/beat.py):
# reconcile redoes the dispatches whose tasks were lost meanwhile, within seconds of the broker's return.
BEAT_ON_BROKER_BACK = env.list("BEAT_ON_BROKER_BACK", default=["waitlist-reconcile"])

# --- Features, the outbox, notices and texts --------------------------------------------------------------

# With no FeatureFlag row a feature takes this default; `feature_set` writes the row.
FEATURE_DEFAULTS = {"waitlist": env.bool("WAITLIST_ENABLED_BY_DEFAULT", default=False)}
OUTBOX_MAX_ATTEMPTS = env.int("OUTBOX_MAX_ATTEMPTS", default=6)
OUTBOX_BACKOFF_SECONDS = env.int("OUTBOX_BACKOFF_SECONDS", default=30)
NOTIFY_DEFAULT_PROVIDER = env("NOTIFY_DEFAULT_PROVIDER", default="console")
# The production guard (common/checks.py) refuses the console provider unless this says otherwise.
NOTIFY_ALLOW_CONSOLE_IN_PRODUCTION = env.bool("NOTIFY_ALLOW_CONSOLE_IN_PRODUCTION", default=False)
# The webhook provider's signing secret (the production guard refuses the demo one).
NOTIFY_WEBHOOK_SECRET = env("NOTIFY_WEBHOOK_SECRET", default="demo-webhook-secret")
NOTIFY_CONTACT_CAP_PER_DAY = env.int("NOTIFY_CONTACT_CAP_PER_DAY", default=3)
PUBLIC_BASE_URL = env("PUBLIC_BASE_URL", default="http://127.0.0.1:8000")
# Texts (issue 39): Twilio for clinics whose notification provider is "sms". TWILIO_API_BASE_URL points the
# library elsewhere (a loopback gateway, a staging mock); TWILIO_WEBHOOK_BASE_URL is the public base Twilio
# posts to and signs (else PUBLIC_BASE_URL). NOTIFY_CONSOLE_TEXTS: console clinics print their texts (demo).
# TWILIO_AUTH_TOKEN: local.py / production.py.
TWILIO_ACCOUNT_SID = env("TWILIO_ACCOUNT_SID", default="")
TWILIO_FROM = env("TWILIO_FROM", default="")
TWILIO_API_BASE_URL = env("TWILIO_API_BASE_URL", default="")
TWILIO_WEBHOOK_BASE_URL = env("TWILIO_WEBHOOK_BASE_URL", default="")
NOTIFY_CONSOLE_TEXTS = env.bool("NOTIFY_CONSOLE_TEXTS", default=False)
# Inbound texts per sender number (fixed window); replies within this many days are matched to their texts.
TEXT_INBOUND_RATE = env("TEXT_INBOUND_RATE", default="10/min")
TEXT_REPLY_DAYS = env.int("TEXT_REPLY_DAYS", default=7)
TEXT_FAILING_AFTER = env.int("TEXT_FAILING_AFTER", default=2)  # failed texts in a row: the Action queue shows them
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="127.0.0.1")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="waitlist@clinic.example")

# --- The staff console (operations) -----------------------------------------------------------------------

CONSOLE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'"
)
# Swagger UI renders an inline bootstrap script, so the API docs keep their own (absent) policy.
CONSOLE_CSP_EXEMPT_PATHS = env.list("CONSOLE_CSP_EXEMPT_PATHS", default=["/api/docs/"])
# Sign-in throttle (console and /admin/login/): failures per user name and per address in a window.
CONSOLE_LOGIN_MAX_FAILURES = env.int("CONSOLE_LOGIN_MAX_FAILURES", default=5)
CONSOLE_LOGIN_MAX_FAILURES_PER_ADDRESS = env.int("CONSOLE_LOGIN_MAX_FAILURES_PER_ADDRESS", default=20)
CONSOLE_LOGIN_WINDOW_SECONDS = env.int("CONSOLE_LOGIN_WINDOW_SECONDS", default=15 * 60)
# ADMIN commands in the console need a sign-in (or re-entered password) this recent.
CONSOLE_REAUTH_MINUTES = env.int("CONSOLE_REAUTH_MINUTES", default=10)
CONSOLE_AUDIT_PAGE_SIZE = env.int("CONSOLE_AUDIT_PAGE_SIZE", default=50)
CONSOLE_LIST_PAGE_SIZE = env.int("CONSOLE_LIST_PAGE_SIZE", default=25)
# The Waitlist page's live regions (the Action queue, today's open vacancies, the offers in flight) poll this often.
CONSOLE_LIVE_SECONDS = env.int("CONSOLE_LIVE_SECONDS", default=10)

# --- Reevaluation and the CRM -----------------------------------------------------------------------------

# CRM → service signed events (HMAC-SHA256 over the raw body): REEVALUATION_HMAC_KEYS in local.py / production.py.
REEVALUATION_ISSUER = env("REEVALUATION_ISSUER", default="demo-crm")
REEVALUATION_AUDIENCE = env("REEVALUATION_AUDIENCE", default="clinic-waitlist")
# Client-supplied times must fall in a sane range (common/bounds.py): bookings now-1y..now+5y,
# CRM source times 2000-01-01..now+skew.
BOOKING_PAST_DAYS = env.int("BOOKING_PAST_DAYS", default=366)
BOOKING_FUTURE_DAYS = env.int("BOOKING_FUTURE_DAYS", default=5 * 366)
EVENT_FUTURE_SKEW_HOURS = env.int("EVENT_FUTURE_SKEW_HOURS", default=24)
REEVALUATION_MAX_BODY_BYTES = env.int("REEVALUATION_MAX_BODY_BYTES", default=16384)
# A clinic without a settings row starts here (rollout order: DISABLED → DRY_RUN → APPLY_*).
REEVALUATION_DEFAULT_MODE = env("REEVALUATION_DEFAULT_MODE", default="DISABLED")
REEVALUATION_HELD_DUE_MINUTES = env.int("REEVALUATION_HELD_DUE_MINUTES", default=5)
REEVALUATION_PROPOSED_DUE_MINUTES = env.int("REEVALUATION_PROPOSED_DUE_MINUTES", default=30)
REEVALUATION_MAX_ATTEMPTS = env.int("REEVALUATION_MAX_ATTEMPTS", default=5)
REEVALUATION_COOLDOWN_SECONDS = env.int("REEVALUATION_COOLDOWN_SECONDS", default=30)
REEVALUATION_MAX_COOLDOWN_SECONDS = env.int("REEVALUATION_MAX_COOLDOWN_SECONDS", default=900)
REEVALUATION_LEASE_SECONDS = env.int("REEVALUATION_LEASE_SECONDS", default=60)
REEVALUATION_DISPATCH_GLOBAL_LIMIT = env.int("REEVALUATION_DISPATCH_GLOBAL_LIMIT", default=50)
REEVALUATION_DISPATCH_PER_CLINIC_LIMIT = env.int("REEVALUATION_DISPATCH_PER_CLINIC_LIMIT", default=5)
# Beat's round task runs its round in the worker (``reevaluation.rounds.services``) and queues the next at once
# while rounds come back full; off: one ``run_job`` task per claimed job, one round per beat tick (5 s).
REEVALUATION_WORKER_ROUNDS = env.bool("REEVALUATION_WORKER_ROUNDS", default=True)
REEVALUATION_REDRIVE_PREVIEW_MINUTES = env.int("REEVALUATION_REDRIVE_PREVIEW_MINUTES", default=15)
# A clinic with more than THRESHOLD quarantine cases within WINDOW minutes drains itself (an ADMIN resumes it).
REEVALUATION_AUTO_DRAIN_QUARANTINE_THRESHOLD = env.int("REEVALUATION_AUTO_DRAIN_QUARANTINE_THRESHOLD", default=3)
REEVALUATION_AUTO_DRAIN_WINDOW_MINUTES = env.int("REEVALUATION_AUTO_DRAIN_WINDOW_MINUTES", default=60)
# CRM intake: quarantine rows stored per source and minute before only a sample is kept (the count
# is always kept, in QuarantineTally).
REEVALUATION_QUARANTINE_STORE_PER_MINUTE = env.int("REEVALUATION_QUARANTINE_STORE_PER_MINUTE", default=30)
REEVALUATION_QUARANTINE_SAMPLE_EVERY = env.int("REEVALUATION_QUARANTINE_SAMPLE_EVERY", default=100)
REEVALUATION_QUARANTINE_TALLY_DAYS = env.int("REEVALUATION_QUARANTINE_TALLY_DAYS", default=30)
# Proposals to the patient (issue 28): lifetime (capped at the appointment's start), times offered, the step
# between candidate starts, and the page link's own horizon.
REEVALUATION_PROPOSAL_HOURS = env.int("REEVALUATION_PROPOSAL_HOURS", default=24)
REEVALUATION_PROPOSAL_MAX_OPTIONS = env.int("REEVALUATION_PROPOSAL_MAX_OPTIONS", default=3)
REEVALUATION_PROPOSAL_STEP_MINUTES = env.int("REEVALUATION_PROPOSAL_STEP_MINUTES", default=30)
REEVALUATION_PROPOSAL_TOKEN_MAX_AGE_DAYS = env.int("REEVALUATION_PROPOSAL_TOKEN_MAX_AGE_DAYS", default=7)
# The CRM assessment API (the demo serves a stub at /crm-stub/ from this same app; CRM_STUB_ENABLED and
# CRM_API_TOKEN: local.py / production.py).
CRM_BASE_URL = env("CRM_BASE_URL", default="http://127.0.0.1:8000/crm-stub")
CRM_CONNECT_TIMEOUT_SECONDS = env.float("CRM_CONNECT_TIMEOUT_SECONDS", default=2.0)
CRM_READ_TIMEOUT_SECONDS = env.float("CRM_READ_TIMEOUT_SECONDS", default=5.0)
CRM_MAX_RESPONSE_BYTES = env.int("CRM_MAX_RESPONSE_BYTES", default=65536)

# --- The waitlist -----------------------------------------------------------------------------------------

# The operating loop (waitlist app): booking retry, claim links and ops metrics.
WAITLIST_BOOKING_RETRY_MINUTES = env.int("WAITLIST_BOOKING_RETRY_MINUTES", default=5)
# A clinic's first policy version has these quiet hours (clinic-local "HH:MM-HH:MM"; empty: none) unless the
# clinic's settings name its own ("quiet_hours": {"start", "end"}, or {} for none).
WAITLIST_NEW_CLINIC_QUIET_HOURS = env.str("WAITLIST_NEW_CLINIC_QUIET_HOURS", default="21:00-08:00")
WAITLIST_CLAIM_TOKEN_MAX_AGE_MINUTES = env.int("WAITLIST_CLAIM_TOKEN_MAX_AGE_MINUTES", default=24 * 60)
# Opt-out links expire (every notice carries a fresh one): a leaked link stops working after this.
WAITLIST_OPTOUT_TOKEN_MAX_AGE_DAYS = env.int("WAITLIST_OPTOUT_TOKEN_MAX_AGE_DAYS", default=90)
# The "book me automatically" page's link (in every waitlist notice) lives this long.
WAITLIST_STANDING_TOKEN_MAX_AGE_DAYS = env.int("WAITLIST_STANDING_TOKEN_MAX_AGE_DAYS", default=60)
WAITLIST_EXPIRE_BATCH = env.int("WAITLIST_EXPIRE_BATCH", default=100)
WAITLIST_RECONCILE_BATCH = env.int("WAITLIST_RECONCILE_BATCH", default=50)
WAITLIST_METRICS_WINDOW_DAYS = env.int("WAITLIST_METRICS_WINDOW_DAYS", default=30)
# The ops snapshot's fairness figures (30-day pass-overs: seconds of SQL at a busy clinic) are recomputed at
# most once per this many seconds per clinic (0: on every read): half an hour, for figures over 30 days.
WAITLIST_FAIRNESS_CACHE_SECONDS = env.int("WAITLIST_FAIRNESS_CACHE_SECONDS", default=1800)
# The console's figures kept per clinic (waitlist.figures.kept): fill metrics, outbox health and the notice
# provider's failure streak; the decision freshness counts (every WAITING patient's newest decision) a minute
# (0: read on every load).
WAITLIST_READINESS_CACHE_SECONDS = env.int("WAITLIST_READINESS_CACHE_SECONDS", default=10)
WAITLIST_DECISION_FRESHNESS_CACHE_SECONDS = env.int("WAITLIST_DECISION_FRESHNESS_CACHE_SECONDS", default=60)
# Background dispatches at once across the deployment (about the database's cores; 0: no limit), and how long
# one waits for a slot before it dispatches without one (a slot is throughput, never correctness).
WAITLIST_DISPATCH_CONCURRENCY = env.int("WAITLIST_DISPATCH_CONCURRENCY", default=4)
WAITLIST_DISPATCH_SLOT_WAIT_SECONDS = env.float("WAITLIST_DISPATCH_SLOT_WAIT_SECONDS", default=10.0)
# Automatic bookings not acknowledged: reminded (when: the clinic's policy, ack_remind_*), then released
# (waitlist/texts/services/acknowledgement.py). The reminder comes at least this long before the release, and the
# release this long before the booking's release deadline.
WAITLIST_ACK_REMIND_LEAD_MINUTES = env.int("WAITLIST_ACK_REMIND_LEAD_MINUTES", default=60)
WAITLIST_ACK_RELEASE_LEAD_MINUTES = env.int("WAITLIST_ACK_RELEASE_LEAD_MINUTES", default=10)

# --- Joining (issue 40) -----------------------------------------------------------------------------------

# Patients join a clinic's waiting list themselves: the public page /join/<clinic>/ and the public API
# /api/v1/public/clinics/{clinic}/... (docs/api.md "Public join contract", docs/security.md "Joining").
# Cross-site browser calls only to the public contract, and only from the origins a clinic lists
# (waitlist.joining.cors: django-cors-headers' check_request_enabled signal); no origin is allowed globally.
CORS_URLS_REGEX = r"^/api/v1/public/clinics/[^/]+/waitlist-requests"
CORS_ALLOWED_ORIGINS: list[str] = []
CORS_ALLOW_METHODS = ("OPTIONS", "POST")
CORS_ALLOW_HEADERS = ("accept", "content-type", "idempotency-key", "x-correlation-id")
CORS_PREFLIGHT_MAX_AGE = 3600
# Limits of the public contract, per client address, per contact (clinic + phone or e-mail), per clinic, and
# per address for the code's verification and resends (common.throttling.rate_exceeded: 429 THROTTLED).
JOIN_THROTTLE_RATES = {
    "address": env("JOIN_THROTTLE_ADDRESS", default="10/hour"),
    "contact": env("JOIN_THROTTLE_CONTACT", default="3/hour"),
    "clinic": env("JOIN_THROTTLE_CLINIC", default="300/hour"),
    "verify": env("JOIN_THROTTLE_VERIFY", default="30/hour"),
}
# The CAPTCHA hook: a dotted path to verify(token, *, address, clinic_ref) -> bool; empty: off.
JOIN_CAPTCHA_VERIFIER = env("JOIN_CAPTCHA_VERIFIER", default="")
WAITLIST_STATUS_TOKEN_MAX_AGE_DAYS = env.int("WAITLIST_STATUS_TOKEN_MAX_AGE_DAYS", default=90)

# --- Observability ----------------------------------------------------------------------------------------

# /metrics scrape tokens (METRICS_SCRAPE_TOKENS): local.py / production.py.
METRICS_CACHE_SECONDS = env.int("METRICS_CACHE_SECONDS", default=10)
READYZ_BEAT_MAX_AGE_SECONDS = env.int("READYZ_BEAT_MAX_AGE_SECONDS", default=300)
READYZ_BROKER_TIMEOUT_SECONDS = env.float("READYZ_BROKER_TIMEOUT_SECONDS", default=1.0)
# A process re-checks the broker for /readyz and /metrics at most this often (a down one costs the timeout).
READYZ_BROKER_CHECK_EVERY_SECONDS = env.float("READYZ_BROKER_CHECK_EVERY_SECONDS", default=10.0)
# Beat and workers record their own life in PostgreSQL (observability.components): a worker every
# WORKER_HEARTBEAT_SECONDS, beat about every 10 s; older than COMPONENT_STALE_SECONDS is "stale".
WORKER_HEARTBEAT_SECONDS = env.float("WORKER_HEARTBEAT_SECONDS", default=15.0)
COMPONENT_STALE_SECONDS = env.float("COMPONENT_STALE_SECONDS", default=90.0)

# --- FHIR (interop, docs/fhir.md) -------------------------------------------------------------------------

FHIR_SUBSCRIPTION_ERROR_AFTER = env.int("FHIR_SUBSCRIPTION_ERROR_AFTER", default=3)
FHIR_SUBSCRIPTION_TIMEOUT_SECONDS = env.float("FHIR_SUBSCRIPTION_TIMEOUT_SECONDS", default=5.0)

# --- The fast paths ---------------------------------------------------------------------------------------

# The fast paths (common/fastpath/README.md: compiled-once querysets, server-side prepared statements, dispatch
# slots, one Redis client per cache pool). FASTPATHS=off takes the ORM's and Django's own roads everywhere: the
# same answers, slower; CI runs the fast paths' own tests and a smoke subset with them off.
FASTPATHS = env.bool("FASTPATHS", default=True)
