"""Self-service joining from the shell, through the same audited command as the API (issue 40).

    manage.py waitlist_join_settings --clinic CL --actor-username NAME                  # show
    manage.py waitlist_join_settings --clinic CL --on --treatment tr_… --treatment tr_… \\
        [--origin https://clinic.example] [--approval|--no-approval] [--upkeep-weeks 8] --reason TEXT \\
        --actor-username NAME
    manage.py waitlist_join_settings --clinic CL --off --reason TEXT --actor-username NAME

The actor must be an ADMIN of the clinic (``join_settings_set`` in ``scheduling.scoping.COMMAND_ROLES``).
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from common.errors import DomainError
from scheduling.management.actor import command_actor
from scheduling.models import Treatment
from waitlist.joining.services import join_settings_for, join_settings_set, settings_body


class Command(BaseCommand):
    help = "Show or change whether patients may join a clinic's waiting list themselves (ADMIN, audited)."

    def add_arguments(self, parser):
        parser.add_argument("--clinic", required=True, help="clinic ref")
        state = parser.add_mutually_exclusive_group()
        state.add_argument("--on", dest="enabled", action="store_const", const=True)
        state.add_argument("--off", dest="enabled", action="store_const", const=False)
        parser.add_argument("--treatment", action="append", dest="treatments", help="a treatment ref offered online")
        parser.add_argument("--origin", action="append", dest="origins", help="a web origin allowed to call the API")
        approval = parser.add_mutually_exclusive_group()
        approval.add_argument("--approval", dest="approval", action="store_const", const=True)
        approval.add_argument("--no-approval", dest="approval", action="store_const", const=False)
        parser.add_argument("--upkeep-weeks", type=int, default=None)
        parser.add_argument("--reason", default="")
        parser.add_argument("--actor-username", default="", help="an ADMIN of the clinic")

    def handle(self, *args, clinic, enabled, treatments, origins, approval, upkeep_weeks, reason, actor_username,
               **options):
        changing = any(v is not None for v in (enabled, treatments, origins, approval, upkeep_weeks))
        user, scoped = command_actor(actor_username, clinic, command="join_settings_set" if changing else None)
        if changing:
            if not reason:
                raise CommandError("give --reason")
            rows = None
            if treatments is not None:
                rows = list(Treatment.objects.filter(clinic=scoped, ref__in=treatments))
                if len(rows) != len(set(treatments)):
                    raise CommandError("NOT_FOUND: a treatment is not of this clinic")
            try:
                join_settings_set(clinic=scoped, actor=user, reason=reason, enabled=enabled, treatments=rows,
                                  allowed_origins=origins, approval_required=approval, upkeep_weeks=upkeep_weeks)
            except DomainError as exc:
                raise CommandError(f"{exc.code}: {exc.detail}") from exc
        settings = join_settings_for(scoped)
        self.stdout.write(json.dumps(settings_body(settings) if settings else {"enabled": False}))
