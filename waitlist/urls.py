"""API routes of this app, mounted under /api/v1/ by config/urls.py."""

from django.urls import include, path

from waitlist.api import views
from waitlist.policy import api as controls

C = "clinics/<str:clinic>/"

urlpatterns = [
    # scheduling's resource, the waitlist's command (a cancellation may open a vacancy in the same transaction)
    path(C + "appointments/<str:ref>/cancel", views.AppointmentCancelView.as_view(), name="appointment-cancel"),
    path("", include("waitlist.joining.urls")),  # patients joining by themselves (issue 40)
    path(C + "waitlist-entries/", views.EntryCreateView.as_view(), name="waitlist-entry-create"),
    path(C + "waitlist-entries/<str:ref>", views.EntryDetailView.as_view(), name="waitlist-entry-detail"),
    path(
        C + "waitlist-entries/<str:ref>/priority",
        views.EntryPriorityView.as_view(),
        name="waitlist-entry-priority",
    ),
    path(
        C + "waitlist-entries/<str:ref>/standing-acceptance",
        views.EntryStandingAcceptanceView.as_view(),
        name="waitlist-entry-standing-acceptance",
    ),
    path(
        C + "waitlist-entries/<str:ref>/withdraw",
        views.EntryWithdrawView.as_view(),
        name="waitlist-entry-withdraw",
    ),
    path(C + "vacancies/<str:ref>", views.VacancyDetailView.as_view(), name="vacancy-detail"),
    path(C + "vacancies/<str:ref>/dispatch", views.VacancyDispatchView.as_view(), name="vacancy-dispatch"),
    path(C + "offers/<str:ref>", views.OfferDetailView.as_view(), name="offer-detail"),
    path(C + "offers/<str:ref>/claim", views.OfferClaimView.as_view(), name="offer-claim"),
    path(C + "offers/<str:ref>/decline", views.OfferDeclineView.as_view(), name="offer-decline"),
    path(C + "offers/<str:ref>/withdraw", views.OfferWithdrawView.as_view(), name="offer-withdraw"),
    path(C + "offers/<str:ref>/release", views.OfferReleaseView.as_view(), name="offer-release"),
    path(C + "offers/<str:ref>/late-accept", views.OfferLateAcceptView.as_view(), name="offer-late-accept"),
    path(C + "holds/<str:ref>/book", views.HoldBookView.as_view(), name="hold-book"),
    path(C + "vacancies/<str:ref>/close", views.VacancyCloseView.as_view(), name="vacancy-close"),
    path(C + "vacancies/<str:ref>/reopen", views.VacancyReopenView.as_view(), name="vacancy-reopen"),
    path(C + "vacancies/<str:ref>/review", views.VacancyReviewView.as_view(), name="vacancy-review"),
    path(C + "holds/<str:ref>/retry-booking", views.HoldRetryBookingView.as_view(), name="hold-retry-booking"),
    path(C + "shadow-policy", views.ShadowPolicyView.as_view(), name="shadow-policy"),
    path(C + "shadow-policy/<str:ref>/promote", views.ShadowDecideView.as_view(decision="promote"),
         name="shadow-policy-promote"),
    path(C + "shadow-policy/<str:ref>/discard", views.ShadowDecideView.as_view(decision="discard"),
         name="shadow-policy-discard"),
    path("ops/waitlist", views.WaitlistOpsView.as_view(), name="waitlist-ops"),
    path(C + "booking-decisions/", views.DecisionFeedView.as_view(), name="booking-decision-feed"),
    # Operator controls (ADMIN writes): switch, tenant allowlist, policy versions.
    path(C + "waitlist/controls", controls.WaitlistControlsView.as_view(), name="waitlist-controls"),
    path(C + "waitlist/switch", controls.WaitlistSwitchView.as_view(), name="waitlist-switch"),
    path(C + "waitlist/tenant-allowlist", controls.WaitlistAllowlistView.as_view(), name="waitlist-allowlist"),
    path(C + "waitlist/policy", controls.WaitlistPolicyView.as_view(), name="waitlist-policy"),
]
