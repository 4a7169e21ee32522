"""API routes of self-service joining, mounted under /api/v1/ by ``waitlist.urls``."""

from django.urls import path

from waitlist.joining import api

P = "public/clinics/<str:clinic>/"
C = "clinics/<str:clinic>/"

urlpatterns = [
    path(P + "waitlist-requests", api.JoinRequestCreateView.as_view(), name="join-request-create"),
    path(P + "waitlist-requests/<str:ref>/verify", api.JoinRequestVerifyView.as_view(), name="join-request-verify"),
    path(P + "waitlist-requests/<str:ref>/resend", api.JoinRequestResendView.as_view(), name="join-request-resend"),
    path("public/clinics/<str:clinic>", api.PublicClinicView.as_view(), name="join-public-clinic"),
    path(C + "join-settings", api.JoinSettingsView.as_view(), name="join-settings"),
    path(C + "join-requests/", api.JoinQueueView.as_view(), name="join-queue"),
    path(C + "join-requests/<str:ref>/approve", api.JoinDecisionView.as_view(decision="approve"),
         name="join-request-approve"),
    path(C + "waitlist-entries/<str:ref>/resume", api.EntryResumeView.as_view(), name="waitlist-entry-resume"),
    path(C + "join-requests/<str:ref>/reject", api.JoinDecisionView.as_view(decision="reject"),
         name="join-request-reject"),
]
