"""The waitlist rollout from the shell, through the same audited commands as the console and the API.

    manage.py waitlist_rollout show      --clinic CL --actor-username NAME
    manage.py waitlist_rollout switch    --clinic CL --on|--off --reason TEXT --actor-username NAME
    manage.py waitlist_rollout allowlist --clinic CL --on|--off --reason TEXT --actor-username NAME

``switch`` turns the waitlist on or off for one clinic; ``allowlist`` puts the clinic's tenant group on the
rollout allowlist or takes it off (a new tenant starts off). The actor must be an ADMIN of the clinic
(``scheduling.scoping.COMMAND_ROLES``).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from common.errors import DomainError
from scheduling.management.actor import command_actor
from waitlist import services
from waitlist.policy.reads import controls_snapshot


class Command(BaseCommand):
    help = "Show the waitlist switch of a clinic, switch it, or change its tenant's place on the allowlist."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=("show", "switch", "allowlist"))
        parser.add_argument("--clinic", required=True, help="clinic ref")
        state = parser.add_mutually_exclusive_group()
        state.add_argument("--on", dest="state", action="store_const", const=True)
        state.add_argument("--off", dest="state", action="store_const", const=False)
        parser.add_argument("--reason", default="")
        parser.add_argument("--actor-username", default="", help="an ADMIN of the clinic")

    def handle(self, *args, action, clinic, state, reason, actor_username, **options):
        command = {"switch": "waitlist_switch_set", "allowlist": "waitlist_tenant_allow"}.get(action)
        user, scoped = command_actor(actor_username, clinic, command=command)
        if action != "show":
            if state is None:
                raise CommandError("give --on or --off")
            run = services.waitlist_switch_set if action == "switch" else services.waitlist_tenant_allow
            kwargs = {"enabled": state} if action == "switch" else {"allowed": state}
            try:
                run(clinic=scoped, actor=user, reason=reason, system_label="manage.py", **kwargs)
            except DomainError as exc:
                raise CommandError(f"{exc.code}: {exc.detail}") from exc
        switch = controls_snapshot(clinic=scoped)["switch"]
        self.stdout.write(" ".join(f"{key}={value}" for key, value in switch.items()))
