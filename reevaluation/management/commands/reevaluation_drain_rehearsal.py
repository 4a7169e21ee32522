"""Rehearse a drain of one clinic end to end (the seed's "drain rehearsals"; docs/runbook.md "Rollback").

1. ``drain_set(DRAINING)`` as the ADMIN named by ``--actor-username`` (no new claims; DRAINED at once when
   nothing runs), after reading the rollback readout as the baseline;
2. wait for the leases to end, printing progress every ``--poll`` seconds, up to ``--timeout`` (each poll does
   what beat's ``rescue_leases`` does: rescue expired leases, finish the drain);
3. show the readout (drained without leases, no CONFIRMED changed, no HELD lost, rows preserved against the
   baseline, jobs finished and remaining);
4. resume (``drain_set(ACTIVE)``) unless ``--stay-drained``.

Every move is audited by ``drain_set``; the rehearsal itself writes ``reevaluation.drain_rehearsal`` with its
result. Exit status 1 when the leases did not end in time or an invariant failed (the clinic is resumed anyway,
unless ``--stay-drained``). The mutation mode is not touched: a rehearsal is not a rollback.
"""

from __future__ import annotations

import sys
import time

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from common.errors import DomainError
from common.services import audit_record
from reevaluation.management.commands.reevaluation_rollback_readout import summary_lines
from reevaluation.models import DrainState, JobState, ReevaluationJob
from reevaluation.modes.readout import rollback_readout, rows_preserved
from reevaluation.modes.services import settings_for
from reevaluation.services import drain_refresh, drain_set, rescue_expired_leases
from scheduling.management.actor import command_actor


class Command(BaseCommand):
    help = "Drain a clinic, wait for its leases to end, show the rollback readout, and resume (audited)."

    def add_arguments(self, parser):
        parser.add_argument("--clinic", required=True)
        parser.add_argument("--actor-username", required=True, help="an ADMIN of the clinic with the operate grant")
        parser.add_argument("--reason", required=True)
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for leases (default 300)")
        parser.add_argument("--poll", type=float, default=2.0, help="seconds between progress lines (default 2)")
        parser.add_argument("--stay-drained", action="store_true", help="do not resume at the end")

    def handle(self, *args, **options):
        actor, clinic = command_actor(options["actor_username"], options["clinic"], command="drain_set")
        reason = options["reason"].strip()
        if len(reason) < 5:
            raise CommandError("--reason: say why (5 characters or more)")
        if settings_for(clinic).drain_state != DrainState.ACTIVE:
            raise CommandError("the clinic is not ACTIVE: a rehearsal starts from ACTIVE (resume it first)")
        started = timezone.now()
        baseline = rollback_readout(clinic=clinic, since=started)
        running = ReevaluationJob.objects.filter(clinic=clinic, state=JobState.RUNNING)
        leases_at_start = running.count()
        self.stdout.write(f"rehearsal {clinic.ref}: draining ({leases_at_start} lease(s) active)")
        try:
            row = drain_set(clinic=clinic, state=DrainState.DRAINING, actor=actor, reason=f"rehearsal: {reason}")
        except DomainError as exc:
            raise CommandError(f"{exc.code}: {exc.detail}") from exc
        deadline = time.monotonic() + options["timeout"]
        while row.drain_state != DrainState.DRAINED:
            if time.monotonic() >= deadline:
                break
            left = list(running.order_by("lease_expires_at").values_list("ref", "lease_expires_at"))
            soonest = left[0][1].isoformat() if left and left[0][1] else "-"
            self.stdout.write(f"  waiting: {len(left)} lease(s) active; next lease ends {soonest}")
            time.sleep(options["poll"])
            rescue_expired_leases()
            drain_refresh()
            row = settings_for(clinic)
        drained = row.drain_state == DrainState.DRAINED
        waited = (timezone.now() - started).total_seconds()
        readout = rollback_readout(clinic=clinic, since=started)
        preserved = rows_preserved(baseline, readout)
        self.stdout.write(f"  {'DRAINED' if drained else 'TIMED OUT while DRAINING'} after {waited:.1f} s")
        for line in summary_lines(readout):
            self.stdout.write("  " + line)
        self.stdout.write("  preserved     " + " ".join(f"{k}={'ok' if v else 'FAIL'}" for k, v in preserved.items()))
        checks = readout["checks"]
        ok = drained and checks["drained_without_leases"] and checks["no_confirmed_changed"] and checks[
            "no_held_lost"] and all(preserved.values())
        resumed = False
        if not options["stay_drained"]:
            drain_set(clinic=clinic, state=DrainState.ACTIVE, actor=actor, reason=f"rehearsal done: {reason}")
            resumed = True
            self.stdout.write("  resumed: ACTIVE")
        audit_record(
            actor=actor, action="reevaluation.drain_rehearsal", clinic=clinic, reason=reason,
            result={"ok": ok, "drained": drained, "waited_seconds": round(waited, 1),
                    "leases_at_start": leases_at_start, "resumed": resumed, "rows_preserved": preserved,
                    "checks": checks, "jobs_remaining": readout["jobs"]["remaining"]},
        )
        self.stdout.write(f"rehearsal {'passed' if ok else 'FAILED'}")
        if not ok:
            sys.exit(1)
