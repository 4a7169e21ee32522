"""Revoke a user's API token (``--reissue`` prints a new one): ``manage.py api_token_revoke alice``."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from common.tokens import token_reissue


class Command(BaseCommand):
    help = "Revoke a user's API token; with --reissue, print a new one."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--reissue", action="store_true", help="create a new token after revoking")

    def handle(self, *args, username, reissue, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError("unknown user")
        if reissue:
            self.stdout.write(f"New API token for {username}: {token_reissue(user).key}")
            return
        deleted, _ = Token.objects.filter(user=user).delete()
        self.stdout.write(f"Revoked {deleted} token(s) for {username}.")
