"""The patient's join and status pages, mounted at /join/ by config/urls.py (issue 40)."""

from django.urls import path

from common.throttling import page_throttle
from waitlist.joining import pages

urlpatterns = [
    # Before the clinic's pages: "status" is no clinic ref.
    path("status/<str:token>/", page_throttle("join-status")(pages.status_page), name="join-status"),
    path("<str:clinic_ref>/", pages.join_page, name="join-page"),
    path("<str:clinic_ref>/code/<str:ref>/", pages.code_page, name="join-code"),
]
