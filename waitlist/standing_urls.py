"""The "book me automatically" page, mounted at /standing/ by config/urls.py."""

from django.urls import path

from . import standing_page

urlpatterns = [path("<str:token>/", standing_page.standing_page, name="waitlist-standing")]
