"""The patient claim page and a booking's calendar file, mounted at /claim/ by config/urls.py."""

from django.urls import path

from . import views

urlpatterns = [
    path("calendar/<str:token>.ics", views.claim_calendar, name="waitlist-calendar"),
    path("<str:token>/", views.claim_page, name="waitlist-claim"),
]
