from django.core.management.base import BaseCommand

from common import outbox
from common.tasks import worker_name


class Command(BaseCommand):
    help = "Deliver one bounded round of due outbox messages (what the beat job does)."

    def add_arguments(self, parser):
        parser.add_argument("--limit", type=int, default=50)
        parser.add_argument("--reclaim", action="store_true", help="first return expired leases to PENDING")

    def handle(self, *args, limit, reclaim, **options):
        if reclaim:
            self.stdout.write(f"reclaimed: {outbox.outbox_reclaim_expired()}")
        counts = outbox.outbox_deliver_due(worker=worker_name(), limit=limit)
        self.stdout.write(f"delivered: {counts or 'nothing due'}")
