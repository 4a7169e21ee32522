from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from operations.views import admin_login

api_v1 = [
    path("", include("scheduling.api.urls")),
    path("", include("waitlist.urls")),
    path("", include("reevaluation.urls")),
    path("", include("operations.urls")),
]

urlpatterns = [
    # Before admin.site.urls: the admin's sign-in goes through the console's throttle.
    path("admin/login/", admin_login, name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include(api_v1)),
    path("console/", include("operations.console_urls")),
    # The patient claim page (waitlist): signed single-offer links from the notification.
    path("claim/", include("waitlist.claim_urls")),
    # The demo's CRM assessment stub (reevaluation); answers 404 unless CRM_STUB_ENABLED.
    path("crm-stub/", include("reevaluation.crm_stub")),
]
