from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from django.views.generic import RedirectView

from common.schema_view import SchemaView, SwaggerView
from operations.views import admin_login

from .api_root import ApiRootView

api_v1: list[URLPattern | URLResolver] = [
    path("", ApiRootView.as_view(), name="api-root"),
    path("", include("scheduling.api.urls")),
    path("", include("waitlist.urls")),
    path("", include("reevaluation.urls")),
    path("", include("operations.urls")),
    path("", include("interop.urls")),  # read-only FHIR R4 Slot/Appointment
]

urlpatterns = [
    # A newcomer's first URL: the console (which asks to sign in).
    path("", RedirectView.as_view(pattern_name="console:index", permanent=False), name="root"),
    # Before admin.site.urls: the admin's sign-in goes through the console's throttle.
    path("admin/login/", admin_login, name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/docs/", SwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include(api_v1)),
    path("console/", include("operations.console_urls")),
    # The patient's reevaluation proposal page (signed single-proposal link; under /claim/ so the claim links'
    # log redaction covers it). Before the claim page's own routes, which would take any token.
    path("claim/", include("reevaluation.proposals.urls")),
    # The patient claim page (waitlist): signed single-offer links from the notification.
    path("claim/", include("waitlist.offers.urls")),
    # The opt-out page linked from every notice (signed patient token, no sign-in).
    path("optout/", include("waitlist.notices.optout_urls")),
    # "Book me automatically" (standing acceptance), linked from every waitlist notice (signed entry token).
    path("standing/", include("waitlist.standing.urls")),
    # Texts (issue 39): Twilio's signed webhooks and the short link /c/<code> of every text.
    path("", include("waitlist.texts.urls")),
    # Patients join a clinic's waiting list themselves, and their status page (signed link): issue 40.
    path("join/", include("waitlist.joining.page_urls")),
    # The demo's CRM assessment stub (reevaluation); answers 404 unless CRM_STUB_ENABLED.
    path("crm-stub/", include("reevaluation.crm_stub")),
    # Probes and Prometheus (observability): /healthz, /readyz, /metrics (scrape token).
    path("", include("observability.urls")),
]
