"""API routes of this app, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from .api import views

urlpatterns = [
    path(
        "events/patient-scheduling-assessment-changed",
        views.EventIntakeView.as_view(),
        name="reevaluation-event-intake",
    ),
    path("ops/profile-reevaluation", views.ProfileReevaluationOpsView.as_view(), name="reevaluation-ops"),
    path("ops/profile-reevaluation/drain", views.ReevaluationDrainView.as_view(), name="reevaluation-drain"),
]
