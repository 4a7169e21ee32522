from django.core.management.base import BaseCommand

from reevaluation.services import dispatch_round, worker


class Command(BaseCommand):
    help = "Beat job: claim one fair dispatch round (optionally run the claimed jobs inline)."

    def add_arguments(self, parser):
        parser.add_argument("--run", action="store_true", help="run the claimed jobs in this process")
        parser.add_argument("--rounds", type=int, default=1)

    def handle(self, *args, **options):
        for _ in range(options["rounds"]):
            claims = dispatch_round()
            self.stdout.write(f"claimed {len(claims)}")
            if options["run"]:
                for claim in claims:
                    state = worker.job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt)
                    self.stdout.write(f"{claim.job_ref} {state}")
            else:
                from reevaluation.tasks import run_job

                for claim in claims:
                    run_job.delay(claim.job_id, claim.owner, claim.attempt)
