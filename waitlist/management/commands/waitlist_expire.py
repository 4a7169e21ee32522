from django.core.management.base import BaseCommand

from waitlist.services import expire_run


class Command(BaseCommand):
    help = "Expire due waitlist offers (and release their holds): one bounded run, what the beat job does."

    def add_arguments(self, parser):
        parser.add_argument("--limit", type=int, default=None)

    def handle(self, *args, limit, **options):
        self.stdout.write(f"expire: {expire_run(limit=limit)}")
