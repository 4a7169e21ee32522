"""The opt-out page, mounted at /optout/ by config/urls.py."""

from django.urls import path

from . import optout

urlpatterns = [path("<str:token>/", optout.optout_page, name="waitlist-optout")]
