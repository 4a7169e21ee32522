"""Where a real-work reevaluation job's time goes: ``python -m bench.reevaluation_profile [JOBS]``.

One clinic with ``JOBS`` scopes, each a HELD appointment that the assessment moves to the other
practitioner (``bench.reevaluation``'s real-work column: APPLY_PROPOSED_AND_HELD, HOLD_REPLACED), run by the
inline worker (``rounds.work_round``) in this process under cProfile, with every SQL statement counted and timed
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
    ("claim a fair round (dispatch_round)", "(dispatch_round)"),
    ("CRM fetch + verify (fetch_assessment: client, parse, hash)", "(fetch_assessment)"),
    ("assessment parse and canonical form", "(parse_document)"),
    ("the round's HELD replacements together (_complete_held_batch)", "(_complete_held_batch)"),
    ("  read the scopes' appointments (_scope_rows)", "(_scope_rows)"),
    ("  CONFIRMED-untouched digest, before and after (confirmed_digest)", "(confirmed_digest)"),
    ("  practitioners and treatments (_Catalogues)", "(__init__)"),
    ("  lock heads and jobs (_locked)", "(_locked)"),
    ("  policy advance (policy_advance_many)", "(policy_advance_many)"),
    ("  scheduling: cancel + book all (appointments_replace_held)", "(appointments_replace_held)"),
    ("  live proposals superseded (supersede_live_many)", "(supersede_live_many)"),
    ("  complete the jobs (complete_many)", "(complete_many)"),
    ("one job alone (job_complete: the one-by-one path)", "(job_complete)"),
    ("  decide (decisions.plan)", "(plan)"),
    ("  carry the plan out (_decide_all)", "(_decide_all)"),
    ("  replace the HELD appointment (_replace_held: cancel + book)", "(_replace_held)"),
)


def main(argv: list[str]) -> int:
    plain = "--plain" in argv  # no cProfile: the wall time an unprofiled worker sees
    show = "--statements" in argv  # print one job's statements (the last round's last job)
    argv = [a for a in argv if not a.startswith("--")]
    jobs = int(argv[0]) if argv else 200
    db.configure_environment()
    import django

    django.setup()
    from django.db import connection

    from reevaluation.rounds.services import work_round

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
    seen: list[str] = []

    def timed(execute, statement, params, many, context):
        start = time.perf_counter()
        try:
            return execute(statement, params, many, context)
        finally:
            sql["n"] += 1
            sql["s"] += time.perf_counter() - start
            if show:
                seen.append(statement[:160].replace("\n", " "))

    work_round(client=crm, global_limit=5, per_clinic_limit=5, cursor_name=label)  # warm
    counts: Counter = Counter()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    with connection.execute_wrapper(timed):
        if not plain:
            profiler.enable()
        while True:
            ran = work_round(client=crm, global_limit=50, per_clinic_limit=50, cursor_name=label)
            if not ran:
                break
            counts.update(ran)
        profiler.disable()
    wall = time.perf_counter() - start
    done = sum(counts.values())
    if show:
        print("\n".join(seen[-int(sql["n"] / done) - 8:]))
    print(f"{done} jobs {dict(counts)} in {wall:.2f} s: {done / wall:.0f} jobs/s"
          f"{'' if plain else ' (under cProfile)'}")
    print(f"per job: {1000 * wall / done:.2f} ms wall, {sql['n'] / done:.1f} statements, "
          f"{1000 * sql['s'] / done:.2f} ms inside cursor.execute")
    if plain:
        return 0
    stats = pstats.Stats(profiler)
    for name, suffix in LAYERS:
        cumulative = sum(v[3] for k, v in stats.stats.items()
                         if f"({k[2]})" == suffix and (suffix != "(__init__)" or k[0].endswith("rounds.py")))
        print(f"  {name}: {1000 * cumulative / done:.2f} ms/job")
    stats.sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
