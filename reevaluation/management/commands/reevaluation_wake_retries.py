from django.core.management.base import BaseCommand

from reevaluation.services import wake_retries


class Command(BaseCommand):
    help = "Beat job: RETRY_WAIT jobs whose cooldown has passed become PENDING."

    def handle(self, *args, **options):
        self.stdout.write(f"woken {wake_retries()}")
