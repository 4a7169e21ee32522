from django.core.management.base import BaseCommand

from reevaluation.services import dispatch_round, worker


class Command(BaseCommand):
    help = "Beat job: claim one fair dispatch round (optionally run the claimed jobs inline)."

    def add_arguments(self, parser):
        parser.add_argument("--run", action="store_true", help="run the claimed jobs in this process")
        parser.add_argument("--rounds", type=int, default=1)

    def handle(self, *args, **options):
        for _ in range(options["rounds"]):
            # Run inline: the claim takes the lease under this process's own tokens (no take-over).
            claims = dispatch_round(for_worker=options["run"])
            self.stdout.write(f"claimed {len(claims)}")
            if options["run"]:
                for claim in claims:
                    self.stdout.write(f"{claim.job_ref} {worker.job_run_claimed(claim)}")
            else:
                from reevaluation.tasks import run_job

                for claim in claims:
                    run_job.delay(claim.job_id, claim.owner, claim.attempt)
