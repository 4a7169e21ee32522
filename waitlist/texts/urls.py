"""Mounted at the root by config/urls.py: Twilio's webhooks and the texts' short links."""

from django.urls import path

from common.throttling import page_throttle
from waitlist.texts import views

urlpatterns = [
    path("texts/twilio/inbound", views.inbound, name="texts-inbound"),
    path("texts/twilio/status", views.status, name="texts-status"),
    path("c/<str:code>", page_throttle("short")(views.short_link), name="texts-short-link"),
]
