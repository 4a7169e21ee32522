"""Create (or reuse) the clinic's booking-reliability feed credential and print its API token.

    manage.py waitlist_decision_feed --clinic CL --username NAME

The user gets only the object permission ``scheduling.feed_decisions`` on the clinic (no STAFF role),
so it can post ``/api/v1/clinics/CL/booking-decisions/`` and nothing else; staff cannot post decisions.
"""

from __future__ import annotations

from scheduling.management.integration import IntegrationCredentialCommand
from scheduling.services import clinic_grant_decision_feed


class Command(IntegrationCredentialCommand):
    help = "Create the clinic's decision-feed integration user and print its token."
    grant = staticmethod(clinic_grant_decision_feed)
