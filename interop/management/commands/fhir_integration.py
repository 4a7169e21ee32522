"""Create (or reuse) the clinic's EHR integration credential and print its API token.

    manage.py fhir_integration --clinic CL --username NAME

The user gets only the object permission ``scheduling.fhir_integration`` on the clinic (no STAFF role): it
reads the FHIR view, conditionally updates Appointments and manages Subscriptions (docs/fhir.md). The
grant is audited.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from interop.services import clinic_grant_fhir_integration
from scheduling.models import Clinic


class Command(BaseCommand):
    help = "Create the clinic's FHIR (EHR) integration user and print its token."

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
        clinic_grant_fhir_integration(clinic=target, user=user)
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
