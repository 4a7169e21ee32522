"""The patient claim page and a booking's calendar file, mounted at /claim/ by config/urls.py."""

from django.urls import path

from . import views

urlpatterns = [
    # Directly under /claim/ (no sub-folder) so that common.redaction's /claim/<token> rule digests the
    # token in every log line, as it does the claim link's.
    path("<str:token>.ics", views.claim_calendar, name="waitlist-calendar"),
    path("<str:token>/", views.claim_page, name="waitlist-claim"),
]
