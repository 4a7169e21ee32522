from django.core.management.base import BaseCommand

from reevaluation.rounds.services import work_round_states
from reevaluation.services import dispatch_round


class Command(BaseCommand):
    help = "Beat job: claim one fair dispatch round (optionally run the claimed jobs inline)."

    def add_arguments(self, parser):
        parser.add_argument("--run", action="store_true", help="run the claimed jobs in this process")
        parser.add_argument("--rounds", type=int, default=1)

    def handle(self, *args, **options):
        for _ in range(options["rounds"]):
            if options["run"]:
                # Inline: the claim takes the lease under this process's own tokens (no take-over), and the
                # round's quiet jobs and HELD replacements are written back together (``rounds.work_round``).
                states = work_round_states()
                self.stdout.write(f"claimed {len(states)}")
                for ref, state in states.items():
                    self.stdout.write(f"{ref} {state}")
                continue
            from reevaluation.tasks import run_job

            claims = dispatch_round()
            self.stdout.write(f"claimed {len(claims)}")
            for claim in claims:
                run_job.delay(claim.job_id, claim.owner, claim.attempt)
