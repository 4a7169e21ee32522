"""Where a real-work reevaluation job's time goes: ``python -m bench.reevaluation_profile [JOBS]``.

One clinic with ``JOBS`` scopes, each a HELD appointment that the assessment moves to the other
practitioner (``bench.reevaluation``'s real-work column: APPLY_PROPOSED_AND_HELD, HOLD_REPLACED), run by the
inline worker (``work_round``) in this process under cProfile, with every SQL statement counted and timed
(``execute_wrapper``). Prints per job: wall ms, statements, ms inside ``cursor.execute``, and the cumulative
time of each layer's entry points. Uses the bench database (``BENCH_DATABASE_URL``), which it does not drop:
run ``make bench`` (or ``python -m bench.run --only reevaluation``) first, or any migrated bench database.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections import Counter

from . import db

#: (label, function name suffix in pstats' "file:line(function)" keys) of the layers worth separating.
LAYERS = (
    ("the rounds (work_round: claim, run, write back)", "(work_round)"),
    ("one job (worker._run)", "(_run)"),
    ("CRM fetch + verify (_fetch: client, parse, hash)", "(_fetch)"),
    ("assessment parse and canonical form", "(parse_document)"),
    ("complete (job_complete: decide, apply, outcomes)", "(job_complete)"),
    ("read the scope's appointments (_eligible)", "(_eligible)"),
    ("decide (_decide_all)", "(_decide_all)"),
    ("replace the HELD appointment (_replace: cancel + book)", "(_replace)"),
    ("scheduling: appointment_cancel", "(appointment_cancel)"),
    ("scheduling: appointment_book", "(appointment_book)"),
    ("CONFIRMED-untouched digest (_confirmed_digest)", "(_confirmed_digest)"),
    ("finish (_finish_completed: outcome rows, state)", "(_finish_completed)"),
    ("policy advance (_policy_advance)", "(_policy_advance)"),
    ("completion notice (_completed_notice)", "(_completed_notice)"),
)


def main(argv: list[str]) -> int:
    jobs = int(argv[0]) if argv else 200
    db.configure_environment()
    import django

    django.setup()
    from django.db import connection

    from reevaluation.services.worker import work_round

    from .reevaluation import ZeroLatencyCRM, bulk_jobs, enable, held_scopes

    label = f"prof{int(time.time())}"
    clinic = db.make_clinic(label, practitioners=2)
    enable(clinic, "APPLY_PROPOSED_AND_HELD")
    constraints = {clinic.pk: held_scopes(clinic, jobs)}
    bulk_jobs(clinic, jobs, constraints=constraints[clinic.pk])
    db.sql("UPDATE reevaluation_clinicreevaluationsettings SET drain_state = 'DRAINED' WHERE clinic_id <> %s",
           [clinic.pk])
    db.analyze("reevaluation_reevaluationjob", "scheduling_appointment", "scheduling_patient")
    crm = ZeroLatencyCRM(constraints)
    sql = {"n": 0, "s": 0.0}

    def timed(execute, statement, params, many, context):
        start = time.perf_counter()
        try:
            return execute(statement, params, many, context)
        finally:
            sql["n"] += 1
            sql["s"] += time.perf_counter() - start

    work_round(client=crm, global_limit=5, per_clinic_limit=5, cursor_name=label)  # warm
    counts: Counter = Counter()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    with connection.execute_wrapper(timed):
        profiler.enable()
        while True:
            ran = work_round(client=crm, global_limit=50, per_clinic_limit=50, cursor_name=label)
            if not ran:
                break
            counts.update(ran)
        profiler.disable()
    wall = time.perf_counter() - start
    done = sum(counts.values())
    stats = pstats.Stats(profiler)
    print(f"{done} jobs {dict(counts)} in {wall:.2f} s: {done / wall:.0f} jobs/s (under cProfile)")
    print(f"per job: {1000 * wall / done:.2f} ms wall, {sql['n'] / done:.1f} statements, "
          f"{1000 * sql['s'] / done:.2f} ms inside cursor.execute")
    for name, suffix in LAYERS:
        cumulative = sum(v[3] for k, v in stats.stats.items() if f"({k[2]})" == suffix)
        print(f"  {name}: {1000 * cumulative / done:.2f} ms/job")
    stats.sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
