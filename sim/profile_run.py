"""Profile one real run: ``python -m sim.profile_run POLICY SEED``: the SQL statements grouped by their text
(count, seconds) and the Python functions with the most cumulative time. A developer's tool; changes nothing."""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections import defaultdict

from . import db
from .generator import SCALES, generate


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    name, seed = argv[0], int(argv[1])
    db.configure_environment()
    import django

    django.setup()
    from django.db import connection

    from . import adapter
    from .engine import Replay
    from .policies import ALL_POLICIES

    spec = next(p for p in ALL_POLICIES if p.name == name)
    month = generate(seed, SCALES["default"], 0)
    url = db.run_url(f"prof{seed}")
    db.create_run_database(url)
    db.use_database(url)
    adapter.enable_waitlist()
    stats: dict[str, list] = defaultdict(lambda: [0, 0.0])

    def timed(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            entry = stats[" ".join(sql.split())]
            entry[0] += 1
            entry[1] += time.perf_counter() - started

    replay = Replay(month, spec, f"prof-{name}-{seed}")
    profiler = cProfile.Profile()
    started = time.perf_counter()
    with connection.execute_wrapper(timed):
        profiler.enable()
        replay.run()
        profiler.disable()
    profiler.dump_stats(f"/tmp/sim-profile-{name}-{seed}.pstats")
    total = time.perf_counter() - started
    connection.close()
    db.drop_run_database(url)
    sql_seconds = sum(s for _, s in stats.values())
    print(f"{name} seed {seed}: {total:.1f} s, {sum(n for n, _ in stats.values())} statements, "
          f"{sql_seconds:.1f} s in SQL round trips")
    for text, (n, seconds) in sorted(stats.items(), key=lambda kv: -kv[1][1])[:30]:
        shown = text if len(text) <= 400 else f"{text[:200]} … {text[-200:]}"
        print(f"{n:6d} {seconds:7.2f} {1000 * seconds / n:6.2f} ms  {shown}")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
