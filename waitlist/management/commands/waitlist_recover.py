"""Recovery from the shell, through the same services as the API (never manual SQL).

    manage.py waitlist_recover withdraw-offer  --clinic CL --ref OFFER --reason TEXT --actor-username NAME
    manage.py waitlist_recover close-vacancy   --clinic CL --ref VACANCY ...
    manage.py waitlist_recover reopen-vacancy  --clinic CL --ref VACANCY ...
    manage.py waitlist_recover retry-booking   --clinic CL --ref HOLD ...

Prints the correlation id recorded in the event and audit log.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from common.errors import DomainError
from common.services import new_correlation_id
from scheduling.management.actor import command_actor
from waitlist import services

#: Each action's command in ``scheduling.scoping.COMMAND_ROLES`` (the role the actor needs).
ACTIONS = {
    "withdraw-offer": "offer_withdraw",
    "close-vacancy": "vacancy_close",
    "reopen-vacancy": "vacancy_reopen",
    "retry-booking": "hold_retry_booking",
}


class Command(BaseCommand):
    help = "Recovery commands: withdraw-offer, close-vacancy, reopen-vacancy, retry-booking."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=list(ACTIONS))
        parser.add_argument("--clinic", required=True, help="clinic ref")
        parser.add_argument("--ref", required=True, help="offer, vacancy or hold ref")
        parser.add_argument("--reason", required=True)
        parser.add_argument(
            "--actor-username", required=True, help="a user with the action's role (STAFF may retry a booking)"
        )

    def handle(self, *args, action, clinic, ref, reason, actor_username, **options):
        if not reason.strip():
            raise CommandError("--reason must not be empty")
        user, scoped = command_actor(actor_username, clinic, command=ACTIONS[action])
        correlation_id = new_correlation_id()
        common = {"clinic": scoped, "actor": user, "reason": reason, "correlation_id": correlation_id}
        try:
            if action == "withdraw-offer":
                result = services.offer_withdraw(offer_ref=ref, **common).status
            elif action == "close-vacancy":
                result = services.vacancy_close(vacancy_ref=ref, **common)[0].status
            elif action == "reopen-vacancy":
                result = services.vacancy_reopen(vacancy_ref=ref, **common).status
            else:
                appointment = services.hold_retry_booking(hold_ref=ref, **common).booked()
                result = f"{appointment.status} {appointment.ref}"
        except DomainError as exc:
            raise CommandError(f"{exc.code}: {exc.detail} (correlation {correlation_id})") from exc
        self.stdout.write(f"{action} {ref}: {result}")
        self.stdout.write(f"correlation_id: {correlation_id}")
