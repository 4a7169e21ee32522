"""Read the rollback invariants of one clinic (``--clinic``) or of every clinic (docs/runbook.md "Rollback").

Read-only: it changes nothing. Prints a summary per clinic, or JSON (``--json``); ``--save FILE`` writes the
readout as a baseline and ``--baseline FILE`` compares the row counts with one (every kind must not shrink).
Exit status 0 when every invariant holds, 1 otherwise (so a script can gate on it).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from reevaluation.modes.readout import ROW_KINDS, rollback_readout, rows_preserved
from scheduling.models import Clinic


def summary_lines(readout: dict) -> list[str]:
    checks = readout["checks"]
    mark = {True: "ok", False: "FAIL"}
    rows = readout["rows"]
    jobs = readout["jobs"]
    return [
        f"clinic {readout['clinic']}: rollback {'holds' if readout['ok'] else 'DOES NOT HOLD'}"
        f" (since {readout['since']})",
        f"  switch        {mark[checks['switch_off']]:4} mutation_mode={readout['mutation_mode']}",
        f"  drain         {mark[checks['drained_without_leases']]:4} drain_state={readout['drain_state']}"
        f" active_leases={readout['active_leases']} expired_leases={readout['expired_leases']}",
        f"  CONFIRMED     {mark[checks['no_confirmed_changed']]:4} changed by reevaluation="
        f"{readout['confirmed_changed']['count']} "
        + " ".join(f"{i['appointment']}:{i['finding']}" for i in readout["confirmed_changed"]["items"])
        + f" (consented swaps: {len(readout['confirmed_changed']['consented_swaps'])})",
        f"  HELD          {mark[checks['no_held_lost']]:4} lost outside atomic replacement="
        f"{readout['held_lost']['count']} "
        + " ".join(f"{i['appointment']}:{i['finding']}" for i in readout["held_lost"]["items"])
        + f" (fallbacks to PROPOSED: {readout['held_lost']['held_fallbacks']})",
        "  rows          " + " ".join(f"{k}={rows[k]['total']}(+{rows[k]['since']})" for k in ROW_KINDS),
        f"  jobs          finished since: {jobs['finished_since'] or {}} remaining: {jobs['remaining']} "
        + " ".join(f"{j['job']}:{j['state']}" for j in jobs["remaining_jobs"]),
    ]


class Command(BaseCommand):
    help = "Read the rollback invariants (mode, drain, CONFIRMED changes, lost HELD allocations, rows, jobs)."

    def add_arguments(self, parser):
        parser.add_argument("--clinic", help="a clinic ref (default: every clinic)")
        parser.add_argument("--since", help="ISO 8601 time with offset (default: 24 hours ago)")
        parser.add_argument("--json", action="store_true", help="print the readouts as JSON")
        parser.add_argument("--save", help="write the readouts (JSON) to this file, as a later baseline")
        parser.add_argument("--baseline", help="compare the row counts with a file written by --save")

    def handle(self, *args, **options):
        since: datetime | None = None
        if options["since"]:
            since = parse_datetime(options["since"])
            if since is None or since.tzinfo is None:
                raise CommandError("--since: an ISO 8601 time with an offset, e.g. 2030-12-05T09:00:00+09:00")
        clinics = Clinic.objects.select_related("tenant_group").order_by("pk")
        if options["clinic"]:
            clinics = clinics.filter(ref=options["clinic"])
            if not clinics.exists():
                raise CommandError("--clinic: no such clinic")
        readouts = [rollback_readout(clinic=clinic, since=since) for clinic in clinics]
        baseline = {}
        if options["baseline"]:
            try:
                baseline = {r["clinic"]: r for r in json.loads(Path(options["baseline"]).read_text())}
            except (OSError, ValueError, TypeError, KeyError) as exc:
                raise CommandError(f"--baseline: not a readout file ({type(exc).__name__})") from exc
        for readout in readouts:
            if readout["clinic"] in baseline:
                preserved = rows_preserved(baseline[readout["clinic"]], readout)
                readout["rows_preserved"] = preserved
                readout["ok"] = readout["ok"] and all(preserved.values())
        if options["save"]:
            Path(options["save"]).write_text(json.dumps(readouts, indent=2))
        if options["json"]:
            self.stdout.write(json.dumps(readouts, indent=2))
        else:
            for readout in readouts:
                for line in summary_lines(readout):
                    self.stdout.write(line)
                if "rows_preserved" in readout:
                    self.stdout.write("  preserved     " + " ".join(
                        f"{k}={'ok' if v else 'FAIL'}" for k, v in readout["rows_preserved"].items()))
        if not all(r["ok"] for r in readouts):
            sys.exit(1)
