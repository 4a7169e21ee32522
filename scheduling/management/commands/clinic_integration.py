"""The clinic's integration settings the egress guard reads (common/egress.py, docs/security.md):

    manage.py clinic_integration show --clinic CL --actor-username NAME
    manage.py clinic_integration set  --clinic CL --actor-username NAME --reason TEXT
        [--allow HOST_OR_CIDR ...] [--clear-allow] [--provider console|email|webhook] [--webhook-url URL]

``--allow`` replaces the allowlist (host names and CIDRs a FHIR Subscription endpoint or the webhook may reach
though they are internal: a hospital EHR on 10.x); ``--clear-allow`` empties it. The actor must be an ADMIN of
the clinic (``COMMAND_ROLES["clinic_integration_set"]``); every change is audited with its reason.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from common.egress import ALLOWLIST_KEY
from common.errors import DomainError
from scheduling.management.actor import command_actor
from scheduling.services.integration import PROVIDERS, clinic_integration_set


class Command(BaseCommand):
    help = "Show or set a clinic's egress allowlist, notice provider and webhook URL (ADMIN, audited)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=("show", "set"))
        parser.add_argument("--clinic", required=True, help="clinic ref")
        parser.add_argument("--actor-username", default="", help="an ADMIN of the clinic")
        parser.add_argument("--reason", default="")
        parser.add_argument("--allow", action="append", default=None, help="a host name or CIDR (repeat)")
        parser.add_argument("--clear-allow", action="store_true")
        parser.add_argument("--provider", choices=PROVIDERS)
        parser.add_argument("--webhook-url")

    def handle(self, *args, action, clinic, actor_username, reason, allow, clear_allow, provider, webhook_url,
               **options):
        user, scoped = command_actor(actor_username, clinic, command="clinic_integration_set")
        if action == "set":
            if allow is not None and clear_allow:
                raise CommandError("give --allow or --clear-allow, not both")
            try:
                clinic_integration_set(clinic=scoped, actor=user, reason=reason, provider=provider,
                                       webhook_url=webhook_url, allowlist=[] if clear_allow else allow)
            except DomainError as exc:
                raise CommandError(f"{exc.code}: {exc.detail}") from exc
        notification = scoped.settings.get("notification") or {}
        self.stdout.write(f"allowlist={','.join(scoped.settings.get(ALLOWLIST_KEY) or [])} "
                          f"provider={notification.get('provider', '')} "
                          f"webhook_url={'set' if notification.get('webhook_url') else 'unset'}")
