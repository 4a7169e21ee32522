"""Show or change a clinic's waitlist policy from the shell, through ``policy_change`` (audited).

    manage.py waitlist_policy show --clinic CL
    manage.py waitlist_policy set  --clinic CL --set hold_minutes=15 --set stale_action=NEXT_CANDIDATE \\
        --reason TEXT --actor-username NAME [--expected-version N]

Values are read by the same model-derived form as the console (``--set weekly_offer_cap=`` clears a
nullable field). Every change publishes a new version; the new version and digest are printed.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from common.errors import DomainError
from scheduling.management.actor import command_actor
from waitlist import services
from waitlist.policy.forms import policy_changes, policy_form
from waitlist.policy.reads import policy_body


class Command(BaseCommand):
    help = "Show or change a clinic's waitlist policy (a new version per change)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=("show", "set"))
        parser.add_argument("--clinic", required=True, help="clinic ref")
        parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", dest="assignments")
        parser.add_argument("--reason", default="")
        parser.add_argument("--actor-username", default="", help="an ADMIN of the clinic")
        parser.add_argument("--expected-version", type=int, default=None)

    def handle(self, *args, action, clinic, assignments, reason, actor_username, expected_version, **options):
        user, scoped = command_actor(actor_username, clinic, command="policy_change" if action == "set" else None)
        current = services.policy_current(clinic=scoped)
        if action == "show":
            self._print(policy_body(current))
            return
        if not reason.strip():
            raise CommandError("--reason must not be empty")
        data = {name: "" if value is None else value for name, value in policy_body(current)["fields"].items()}
        for assignment in assignments:
            name, sep, value = assignment.partition("=")
            if not sep or name not in data:
                raise CommandError(f"not an editable field: {name!r} (fields: {', '.join(data)})")
            data[name] = value
        form = policy_form(current, data=data)
        if not form.is_valid():
            raise CommandError(f"VALIDATION_ERROR: {dict(form.errors)}")
        try:
            policy = services.policy_change(clinic=scoped, actor=user, reason=reason,
                                            changes=policy_changes(form, current), expected_version=expected_version)
        except DomainError as exc:
            raise CommandError(f"{exc.code}: {exc.detail}") from exc
        self._print(policy_body(policy))

    def _print(self, body: dict) -> None:
        self.stdout.write(f"version {body['version']} digest {body['digest']}")
        for name, value in body["fields"].items():
            self.stdout.write(f"  {name} = {'' if value is None else value}")
