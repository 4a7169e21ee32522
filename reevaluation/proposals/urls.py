"""The patient's proposal page, mounted at /claim/ by config/urls.py (before the waitlist's claim routes).

The whole ``rp-<token>`` is one path segment right under /claim/, so ``common.redaction`` digests it in every
log line; throttled per client address and per token like the claim page (``common.throttling.page_throttle``).
"""

from django.urls import path

from common.throttling import page_throttle
from reevaluation.proposals import pages as views
from reevaluation.proposals.tokens import PATH_PREFIX

urlpatterns = [
    path(f"{PATH_PREFIX}<str:token>/", page_throttle("proposal")(views.proposal_page), name="reevaluation-proposal"),
]
