"""Console routes, mounted at /console/ by config/urls.py (namespace ``console``).

Clinic pages take ``<str:clinic_ref>`` and are decorated with ``operations.decorators.clinic_view``.
The nav slots in ``operations/nav.py`` light up when these names exist:
``console:waitlist`` and ``console:reevaluation`` (add them below, e.g.
``path("c/<str:clinic_ref>/waitlist/", waitlist_console.page, name="waitlist")``).
"""

from django.urls import path

from . import views, views_reevaluation

app_name = "console"

urlpatterns = [
    path("", views.console_index, name="index"),
    path("login/", views.console_login, name="login"),
    path("logout/", views.console_logout, name="logout"),
    path("c/<str:clinic_ref>/", views.clinic_home, name="clinic-home"),
    path("c/<str:clinic_ref>/audit/", views.audit_log, name="audit"),
    path("c/<str:clinic_ref>/reevaluation/", views_reevaluation.reevaluation_page, name="reevaluation"),
    path(
        "c/<str:clinic_ref>/reevaluation/jobs/<str:job_ref>/",
        views_reevaluation.reevaluation_job,
        name="reevaluation-job",
    ),
    path(
        "c/<str:clinic_ref>/reevaluation/redrive/preview/",
        views_reevaluation.reevaluation_preview,
        name="reevaluation-preview",
    ),
    path(
        "c/<str:clinic_ref>/reevaluation/redrive/execute/",
        views_reevaluation.reevaluation_execute,
        name="reevaluation-execute",
    ),
    path("c/<str:clinic_ref>/reevaluation/mode/", views_reevaluation.reevaluation_mode, name="reevaluation-mode"),
    path(
        "c/<str:clinic_ref>/reevaluation/drain/", views_reevaluation.reevaluation_drain, name="reevaluation-drain"
    ),
    # --- slots for later pages (same clinic_ref argument, names used by the nav) ---
    # path("c/<str:clinic_ref>/waitlist/", ..., name="waitlist"),
]
