from django.core.management.base import BaseCommand

from waitlist.services import reconcile_run


class Command(BaseCommand):
    help = "One bounded waitlist reconcile pass (stale offers, missing holds, stuck bookings, undispatched vacancies)."

    def add_arguments(self, parser):
        parser.add_argument("--limit", type=int, default=None)

    def handle(self, *args, limit, **options):
        self.stdout.write(f"reconcile: {reconcile_run(limit=limit)}")
