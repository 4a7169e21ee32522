"""The patient claim page, mounted at /claim/ by config/urls.py."""

from django.urls import path

from common.throttling import page_throttle

from . import views

urlpatterns = [path("<str:token>/", page_throttle("claim")(views.claim_page), name="waitlist-claim")]
