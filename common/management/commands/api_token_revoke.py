"""Revoke a user's API token (``--reissue`` prints a new one): ``manage.py api_token_revoke alice``."""

from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from common.tokens import token_reissue
from common.usernames import user_by_username


class Command(BaseCommand):
    help = "Revoke a user's API token; with --reissue, print a new one."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--reissue", action="store_true", help="create a new token after revoking")

    def handle(self, *args, username, reissue, **options):
        user = user_by_username(username)  # any spelling of the name: the sign-in form's normalisation
        if user is None:
            raise CommandError("unknown user")
        if reissue:
            self.stdout.write(f"New API token for {user.get_username()}: {token_reissue(user).key}")
            return
        deleted, _ = Token.objects.filter(user=user).delete()
        self.stdout.write(f"Revoked {deleted} token(s) for {user.get_username()}.")
