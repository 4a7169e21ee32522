"""Console routes, mounted at /console/ by config/urls.py (namespace ``console``).

Clinic pages take ``<str:clinic_ref>`` and are decorated with ``operations.decorators.clinic_view``.
The nav slots in ``operations/nav.py`` light up when these names exist
(``console:waitlist``, ``console:reevaluation``: both routed now).
"""

from django.urls import path

from . import (
    patient_contact,
    reauth,
    views,
    views_bulk,
    views_controls,
    views_desk,
    views_lists,
    views_reevaluation,
    views_waitlist,
)

app_name = "console"



def clinic_path(route: str, view, name: str):
    """A clinic page: ``c/<clinic_ref>/`` + ``route``."""
    return path(f"c/<str:clinic_ref>/{route}", view, name=name)


r, w, ctl = views_reevaluation, views_waitlist, views_controls

urlpatterns = [
    path("", views.console_index, name="index"),
    path("login/", views.console_login, name="login"),
    path("logout/", views.console_logout, name="logout"),
    path("search/", views.console_search, name="search"),
    path("reauth/", reauth.reauth_page, name="reauth"),
    clinic_path("", views.clinic_home, "clinic-home"),
    clinic_path("ref/<str:ref>/", views.ref_page, "ref"),
    clinic_path("audit/", views.audit_log, "audit"),
    clinic_path("patients/contact/", patient_contact.patient_contact, "patient-contact"),
    clinic_path("patients/access-log/", patient_contact.patient_access_log, "patient-access-log"),
    clinic_path("reevaluation/", r.reevaluation_page, "reevaluation"),
    clinic_path("reevaluation/finished/", views_lists.reevaluation_finished, "reevaluation-finished"),
    clinic_path("reevaluation/jobs/<str:job_ref>/", r.reevaluation_job, "reevaluation-job"),
    clinic_path("reevaluation/redrive/preview/", r.reevaluation_preview, "reevaluation-preview"),
    clinic_path("reevaluation/redrive/execute/", r.reevaluation_execute, "reevaluation-execute"),
    clinic_path("reevaluation/mode/", r.reevaluation_mode, "reevaluation-mode"),
    clinic_path("reevaluation/drain/", r.reevaluation_drain, "reevaluation-drain"),
    clinic_path("reevaluation/rollback/", r.reevaluation_rollback, "reevaluation-rollback"),
    clinic_path("reevaluation/proposals/<str:proposal_ref>/confirm/", r.reevaluation_proposal_confirm,
                "reevaluation-proposal-confirm"),
    clinic_path("reevaluation/proposals/<str:proposal_ref>/reject/", r.reevaluation_proposal_reject,
                "reevaluation-proposal-reject"),
    clinic_path("waitlist/", w.waitlist_page, "waitlist"),
    clinic_path("waitlist/lists/<str:kind>/", views_lists.waitlist_list, "waitlist-list"),
    clinic_path("waitlist/review/bulk/", views_bulk.waitlist_review_bulk, "waitlist-review-bulk"),
    clinic_path("waitlist/vacancies/<str:vacancy_ref>/", w.waitlist_vacancy, "waitlist-vacancy"),
    clinic_path("waitlist/vacancies/<str:vacancy_ref>/dispatch/", w.waitlist_redispatch, "waitlist-redispatch"),
    clinic_path("waitlist/vacancies/<str:vacancy_ref>/review/", w.waitlist_review, "waitlist-review"),
    clinic_path("waitlist/offers/<str:offer_ref>/withdraw/", w.waitlist_withdraw, "waitlist-withdraw"),
    clinic_path("waitlist/holds/<str:hold_ref>/retry-booking/", w.waitlist_retry_booking, "waitlist-retry-booking"),
    clinic_path("desk/", views_desk.desk_page, "desk"),
    *[clinic_path(f"desk/{name}/", view, f"desk-verb-{name}") for name, view in views_desk.DESK_VIEWS.items()],
    clinic_path("controls/", ctl.controls_page, "controls"),
    clinic_path("controls/switch/", ctl.controls_switch, "controls-switch"),
    clinic_path("controls/allowlist/", ctl.controls_allowlist, "controls-allowlist"),
    clinic_path("controls/policy/", ctl.controls_policy, "controls-policy"),
    clinic_path("controls/shadow/<str:shadow_ref>/promote/", ctl.controls_shadow_promote, "controls-shadow-promote"),
    clinic_path("controls/shadow/<str:shadow_ref>/discard/", ctl.controls_shadow_discard, "controls-shadow-discard"),
]
