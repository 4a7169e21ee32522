"""Console routes, mounted at /console/ by config/urls.py (namespace ``console``).

Clinic pages take ``<str:clinic_ref>`` and are decorated with ``operations.decorators.clinic_view``.
The nav slots in ``operations/nav.py`` light up when these names exist:
``console:waitlist`` and ``console:reevaluation`` (add them below, e.g.
``path("c/<str:clinic_ref>/waitlist/", waitlist_console.page, name="waitlist")``).
"""

from django.urls import path

from . import views

app_name = "console"

urlpatterns = [
    path("", views.console_index, name="index"),
    path("login/", views.console_login, name="login"),
    path("logout/", views.console_logout, name="logout"),
    path("c/<str:clinic_ref>/", views.clinic_home, name="clinic-home"),
    path("c/<str:clinic_ref>/audit/", views.audit_log, name="audit"),
    # --- slots for later pages (same clinic_ref argument, names used by the nav) ---
    # path("c/<str:clinic_ref>/waitlist/", ..., name="waitlist"),
    # path("c/<str:clinic_ref>/reevaluation/", ..., name="reevaluation"),
]
