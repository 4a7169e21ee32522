"""The opt-out page, mounted at /optout/ by config/urls.py."""

from django.urls import path

from common.throttling import page_throttle
from waitlist.notices import optout

urlpatterns = [path("<str:token>/", page_throttle("optout")(optout.optout_page), name="waitlist-optout")]
