"""API routes of this app, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from reevaluation.api import proposals, views

P = "clinics/<str:clinic>/reevaluation/proposals"

urlpatterns = [
    path(
        "events/patient-scheduling-assessment-changed",
        views.EventIntakeView.as_view(),
        name="reevaluation-event-intake",
    ),
    path("ops/profile-reevaluation", views.ProfileReevaluationOpsView.as_view(), name="reevaluation-ops"),
    path("ops/profile-reevaluation/drain", views.ReevaluationDrainView.as_view(), name="reevaluation-drain"),
    path("ops/profile-reevaluation/rollback", views.RollbackReadoutView.as_view(), name="reevaluation-rollback"),
    path("ops/profile-reevaluation/mode-comparison", views.ModeComparisonView.as_view(),
         name="reevaluation-mode-comparison"),
    path(P, proposals.ProposalListView.as_view(), name="reevaluation-proposals"),
    path(P + "/<str:ref>", proposals.ProposalDetailView.as_view(), name="reevaluation-proposal-detail"),
    path(P + "/<str:ref>/confirm", proposals.ProposalConfirmView.as_view(), name="reevaluation-proposal-confirm"),
    path(P + "/<str:ref>/reject", proposals.ProposalRejectView.as_view(), name="reevaluation-proposal-reject"),
]
