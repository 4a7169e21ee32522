"""Load the demo tenant: two clinics in different zones, staff/admin/outsider users, patients, appointments.

Idempotent: running it again changes nothing and prints the same sign-ins.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from reevaluation import demo as reevaluation_demo
from scheduling.demo import DEMO_USERS, seed_scheduling
from waitlist import demo as waitlist_demo
from waitlist.notices.optout import demo_optout_lines


class Command(BaseCommand):
    help = "Load (or confirm) the demo data. Safe to run repeatedly."

    def handle(self, *args, **options):
        if settings.PRODUCTION:
            # Demo users with published passwords and tokens are exactly what production refuses.
            raise CommandError("seed_demo is for development only (DJANGO_ENV=production).")
        world = seed_scheduling()
        for hook in app_hooks():
            hook(world)
        self.stdout.write(self.style.SUCCESS("Demo data ready (development only: these sign-ins are public)."))
        for username, (password, description) in DEMO_USERS.items():
            self.stdout.write(f"  {username:9} / {password:22} {description}")
        for label, token in world["tokens"].items():
            self.stdout.write(f"  API token for {label}: {token}")
        for line in _demo_links(world):  # indented: `make run` prints it with the sign-ins, last
            self.stdout.write(f"  {line}")


def _demo_links(world) -> list[str]:
    """Patient-page links the tour needs (the opt-out page of a demo patient), from the app that signs them."""
    return demo_optout_lines(world)


def app_hooks():
    """Each app seeds its own demo rows (waitlist entries, reevaluation settings) through its services, after
    scheduling's clinics, people and appointments; the console stands above them all, so it names them."""
    return [waitlist_demo.seed_demo, reevaluation_demo.seed_demo]
