"""Console routes, mounted at /console/ by config/urls.py (namespace ``console``).

Clinic pages take ``<str:clinic_ref>`` and are decorated with ``operations.decorators.clinic_view``.
The nav slots in ``operations/nav.py`` light up when these names exist
(``console:waitlist``, ``console:reevaluation``: both routed now).
"""

from django.urls import path

from . import reauth, views, views_bulk, views_controls, views_lists, views_reevaluation, views_waitlist

app_name = "console"

urlpatterns = [
    path("", views.console_index, name="index"),
    path("login/", views.console_login, name="login"),
    path("logout/", views.console_logout, name="logout"),
    path("search/", views.console_search, name="search"),
    path("reauth/", reauth.reauth_page, name="reauth"),
    path("c/<str:clinic_ref>/", views.clinic_home, name="clinic-home"),
    path("c/<str:clinic_ref>/ref/<str:ref>/", views.ref_page, name="ref"),
    path("c/<str:clinic_ref>/audit/", views.audit_log, name="audit"),
    path("c/<str:clinic_ref>/reevaluation/", views_reevaluation.reevaluation_page, name="reevaluation"),
    path(
        "c/<str:clinic_ref>/reevaluation/finished/", views_lists.reevaluation_finished, name="reevaluation-finished"
    ),
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
    path("c/<str:clinic_ref>/waitlist/", views_waitlist.waitlist_page, name="waitlist"),
    path("c/<str:clinic_ref>/waitlist/lists/<str:kind>/", views_lists.waitlist_list, name="waitlist-list"),
    path("c/<str:clinic_ref>/waitlist/review/bulk/", views_bulk.waitlist_review_bulk, name="waitlist-review-bulk"),
    path(
        "c/<str:clinic_ref>/waitlist/vacancies/<str:vacancy_ref>/",
        views_waitlist.waitlist_vacancy,
        name="waitlist-vacancy",
    ),
    path(
        "c/<str:clinic_ref>/waitlist/vacancies/<str:vacancy_ref>/dispatch/",
        views_waitlist.waitlist_redispatch,
        name="waitlist-redispatch",
    ),
    path(
        "c/<str:clinic_ref>/waitlist/vacancies/<str:vacancy_ref>/review/",
        views_waitlist.waitlist_review,
        name="waitlist-review",
    ),
    path(
        "c/<str:clinic_ref>/waitlist/offers/<str:offer_ref>/withdraw/",
        views_waitlist.waitlist_withdraw,
        name="waitlist-withdraw",
    ),
    path(
        "c/<str:clinic_ref>/waitlist/holds/<str:hold_ref>/retry-booking/",
        views_waitlist.waitlist_retry_booking,
        name="waitlist-retry-booking",
    ),
    path("c/<str:clinic_ref>/controls/", views_controls.controls_page, name="controls"),
    path("c/<str:clinic_ref>/controls/switch/", views_controls.controls_switch, name="controls-switch"),
    path("c/<str:clinic_ref>/controls/allowlist/", views_controls.controls_allowlist, name="controls-allowlist"),
    path("c/<str:clinic_ref>/controls/policy/", views_controls.controls_policy, name="controls-policy"),
]
