"""One shape for the commands that issue an integration credential (a user with one object permission on a
clinic and no staff role) and print its API token: the decision feed's, the EHR's."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from scheduling.models import Clinic


class IntegrationCredentialCommand(BaseCommand):
    """``--clinic CL --username NAME``: create (or reuse) the user, give it ``grant`` on the clinic (the grant
    audits itself), print its token. The user never signs in: its password is unusable."""

    #: ``grant(clinic=, user=)``: the one permission the credential carries.
    grant: Callable[..., object]

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
        type(self).grant(clinic=target, user=user)
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
