"""The patient claim page and a booking's calendar file, mounted at /claim/ by config/urls.py.

Both are throttled per client address and per token (``common.throttling.page_throttle``, issue 26).
"""

from django.urls import path

from common.throttling import page_throttle
from waitlist.offers import pages as views

urlpatterns = [
    # Directly under /claim/ (no sub-folder) so that common.redaction's /claim/<token> rule digests the
    # token in every log line, as it does the claim link's.
    path("<str:token>.ics", page_throttle("claim")(views.claim_calendar), name="waitlist-calendar"),
    path("<str:token>/", page_throttle("claim")(views.claim_page), name="waitlist-claim"),
]
