"""The "book me automatically" page, mounted at /standing/ by config/urls.py (throttled per address and per
token like the claim and opt-out pages: ``common.throttling.page_throttle``)."""

from django.urls import path

from common.throttling import page_throttle
from waitlist.standing import page as standing_page

urlpatterns = [path("<str:token>/", page_throttle("standing")(standing_page.standing_page), name="waitlist-standing")]
