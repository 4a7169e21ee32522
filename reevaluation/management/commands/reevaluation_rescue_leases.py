from django.core.management.base import BaseCommand

from reevaluation.services import drain_refresh, rescue_expired_leases


class Command(BaseCommand):
    help = "Beat job: return RUNNING jobs with expired leases to PENDING (or FAILED), finish drains."

    def handle(self, *args, **options):
        self.stdout.write(f"rescued {rescue_expired_leases()} drained {drain_refresh()}")
