"""API routes of this app, mounted under /api/v1/ by config/urls.py."""

urlpatterns: list = []
