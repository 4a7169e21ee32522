"""The patient claim page, mounted at /claim/ by config/urls.py."""

from django.urls import path

from . import views

urlpatterns = [path("<str:token>/", views.claim_page, name="waitlist-claim")]
