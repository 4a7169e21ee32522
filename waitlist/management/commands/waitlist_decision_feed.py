"""Create (or reuse) the clinic's booking-reliability feed credential and print its API token.

    manage.py waitlist_decision_feed --clinic CL --username NAME

The user gets only the object permission ``scheduling.feed_decisions`` on the clinic (no STAFF role),
so it can post ``/api/v1/clinics/CL/booking-decisions/`` and nothing else; staff cannot post decisions.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from scheduling.models import Clinic
from scheduling.services import clinic_grant_decision_feed


class Command(BaseCommand):
    help = "Create the clinic's decision-feed integration user and print its token."

    def add_arguments(self, parser):
        parser.add_argument("--clinic", required=True, help="clinic ref")
        parser.add_argument("--username", required=True, help="the integration's user name")

    def handle(self, *args, clinic, username, **options):
        target = Clinic.objects.filter(ref=clinic).first()
        if target is None:
            raise CommandError("unknown clinic")
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        clinic_grant_decision_feed(clinic=target, user=user)
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
