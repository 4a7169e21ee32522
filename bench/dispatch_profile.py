"""One dispatcher on the contention world, measured: ``python -m bench.dispatch_profile [--vacancies N]
[--profile] [--top N] [--sql]``.

Builds the contention benchmark's world (``bench.contention.build``: 20 practitioners, N OPEN vacancies,
3N WAITING entries that fit every vacancy) in the bench database (created and migrated if missing, never
dropped), then runs the production dispatcher loop (``waitlist.services.vacancies_dispatch``) over every
vacancy in one process and reports offers/s, SQL statements per offer (grouped by their first words, with
their share of the database time) and, with ``--profile``, the cProfile functions with the largest
cumulative and own time. Counts (statements, calls) are the figures to compare on a noisy machine.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import time
import uuid
from collections import Counter, defaultdict

from . import db


def _shape(sql: str) -> str:
    """A statement's kind: its verb and first table (enough to tell the hot path's statements apart)."""
    text = re.sub(r"\s+", " ", sql).strip()
    verb = text.split(" ", 1)[0].upper()
    if verb in ("SAVEPOINT", "RELEASE", "ROLLBACK"):
        return verb
    table = re.search(r'(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', text, re.IGNORECASE)
    return f"{verb} {table.group(1) if table else ''}".strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dispatch_profile")
    parser.add_argument("--vacancies", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="run under cProfile and print the top functions")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sql", action="store_true", help="print one offer's statements in full")
    parser.add_argument("--deliver", action="store_true",
                        help="then deliver the offers' notices (the outbox handler) and measure that instead")
    args = parser.parse_args(argv)

    db.configure_environment()
    import psycopg

    name = db.db_name(db.bench_url())
    with psycopg.connect(db.admin_dsn(db.bench_url()), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')
    import django

    django.setup()
    db.migrate()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from waitlist.services import vacancies_dispatch

    from .contention import build, check_invariants, invariants_ok

    clinic, ids = build(f"prof{uuid.uuid4().hex[:6]}", args.vacancies)
    outcomes: Counter = Counter()
    profiler = cProfile.Profile() if args.profile else None
    if args.deliver:
        for _vacancy_id, _result in vacancies_dispatch(vacancy_ids=ids):
            pass
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        if args.deliver:
            from common.outbox import outbox_deliver_due

            while delivered := outbox_deliver_due(worker="profile", limit=50):
                outcomes.update(delivered)
        else:
            for _vacancy_id, result in vacancies_dispatch(vacancy_ids=ids):
                outcomes[result.outcome] += 1
        if profiler:
            profiler.disable()
        wall = time.perf_counter() - started
    offers = outcomes.get("SENT" if args.deliver else "OFFERED", 0)
    per = max(offers, 1)
    print(f"outcomes {dict(outcomes)}; {offers / wall:.1f} {'notices' if args.deliver else 'offers'}/s "
          f"({wall:.2f} s wall{', under cProfile' if profiler else ''})")
    invariants = check_invariants(clinic, len(ids))
    print(f"invariants hold: {invariants_ok(invariants)}"
          + ("" if invariants_ok(invariants) else f" {invariants}"))
    print(f"SQL statements: {len(queries)} in all, {len(queries) / per:.2f} per offer")
    counts: Counter = Counter()
    seconds: dict[str, float] = defaultdict(float)
    for query in queries.captured_queries:
        kind = _shape(query["sql"])
        counts[kind] += 1
        seconds[kind] += float(query["time"])
    total = sum(seconds.values()) or 1.0
    print(f"database time (as the client saw it): {total:.2f} s = {100 * total / wall:.0f}% of the wall time")
    for kind, n in counts.most_common():
        print(f"  {n / per:6.2f}/offer  {100 * seconds[kind] / total:5.1f}% db time  {kind}")
    if args.sql and args.deliver:
        # The statements of one notice's delivery, after the batch's lease.
        per_notice = round(len(queries) / per)
        for query in queries.captured_queries[1 + per_notice:1 + 2 * per_notice]:
            print(f"--- {query['time']} s: {re.sub(r'[ ]+', ' ', query['sql'])[:300]}")
    elif args.sql:
        # The statements of one vacancy's dispatch, from its claim to the next claim.
        claims = [i for i, q in enumerate(queries.captured_queries) if "dispatch_claimed_until = " in q["sql"]
                  and "FROM (" in q["sql"]]
        middle = len(claims) // 2
        for query in queries.captured_queries[claims[middle]:claims[middle + 1]]:
            text = re.sub(r"\s+", " ", query["sql"])
            print(f"--- {query['time']} s: {text[:400]}")
    if profiler:
        for order in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(args.top)
            print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
