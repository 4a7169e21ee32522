"""Web-tier configurations for the claims benchmark, back to back on one set of offers.

    python -m bench.claims_compare --offers 6000 --rounds 2 \\
        "sync4:BENCH_CLAIMS_WORKERS=4" "gthread2x4:BENCH_CLAIMS_WORKERS=2,BENCH_CLAIMS_THREADS=4"

Each configuration is ``name:VAR=value,VAR=value`` (environment of the gunicorn process; the special
``APP=`` picks the WSGI application, ``config.wsgi:application`` by default). The offers are made once
(``bench.offers.make_offers``, through ``vacancy_dispatch``), then every round runs each configuration
in turn for the same seconds over its own slice of offers (the same wrk script, concurrency and
replays as the benchmark), and one pgbench run per round for reference. Reported per configuration:
claims/s, p50/p99, errors, whether its offers ran out, and the CPU seconds of the gunicorn processes
per request (from ``/proc``: less noisy than throughput on a shared machine). Uses the bench database
as ``bench.run --only claims`` left it (``--keep-db`` semantics: not recreated if it exists).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from . import db

TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and its live children, in seconds."""
    total = 0
    pids = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return total / TICK


def _start(port: int, env_over: dict[str, str]) -> subprocess.Popen:
    from .claims import start_gunicorn

    env_over = {"DJANGO_SETTINGS_MODULE": "config.settings.local", **env_over}
    return start_gunicorn(port, app=env_over.pop("APP", "config.wsgi:application"), env_over=env_over)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.claims_compare")
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--offers", type=int, default=6000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--no-pgbench", action="store_true")
    parser.add_argument(
        "--reuse", action="store_true",
        help="claim the OFFERED offers earlier bench runs left unclaimed (made by vacancy_dispatch, not expiring "
        "within 4 minutes) instead of making new ones",
    )
    args = parser.parse_args(argv)
    configs = []
    for spec in args.configs:
        name, _, rest = spec.partition(":")
        env_over = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
        configs.append((name, env_over))

    db.configure_environment()
    import django

    django.setup()
    from django.db import connections

    from scheduling.models import Role
    from scheduling.services import clinic_grant_role

    from .claims import free_port, pgbench_init, pgbench_run, run_wrk, stop, warm_up
    from .harness import log
    from .offers import make_offers

    label = f"cmp{int(time.time())}"
    if args.reuse:
        from datetime import timedelta

        from django.db.models import Q
        from django.utils import timezone

        from scheduling.models import Clinic
        from waitlist.models import Offer

        soon = timezone.now() + timedelta(minutes=4)
        left = Offer.objects.filter(status="OFFERED", expires_at__gt=soon).filter(
            Q(decision_expires_at__isnull=True) | Q(decision_expires_at__gt=soon)
        )
        offers = list(left.values_list("clinic__ref", "ref").order_by("id")[: args.offers])
        clinics = list(Clinic.objects.filter(ref__in={c for c, _ in offers}))
        log(f"compare: reusing {len(offers):,} OFFERED offers in {len(clinics)} clinics")
    else:
        log(f"compare: making {args.offers:,} offers")
        clinics, offers = make_offers(label, args.offers)

    def fresh_token(run: int) -> str:
        # One user per wrk run, as the benchmark has one per run: the user throttle (API_THROTTLE_USER,
        # per minute) must not carry over from one configuration to the next.
        user, token = db.staff_user(clinics[0], f"bench-compare-{label}-{run}")
        for other in clinics[1:]:
            clinic_grant_role(clinic=other, user=user, role=Role.STAFF)
        connections.close_all()
        return token

    per_run = len(offers) // (len(configs) * args.rounds)
    log(f"compare: {len(offers):,} offers, {per_run:,} per wrk run")
    if not args.no_pgbench:
        pgbench_init(10)
    results: dict[str, list[dict]] = {name: [] for name, _ in configs}
    tps: list[float] = []
    cursor = 0
    for round_no in range(args.rounds):
        order = configs if round_no % 2 == 0 else list(reversed(configs))
        for name, env_over in order:
            chunk = offers[cursor : cursor + per_run]
            cursor += per_run
            token = fresh_token(cursor)
            port = free_port()
            server = _start(port, dict(env_over))
            try:
                warm_up(port, token)
                cpu0 = _tree_cpu_s(server.pid)
                w = run_wrk(port, chunk, token, args.seconds, args.concurrency)
                cpu1 = _tree_cpu_s(server.pid)
            finally:
                stop(server)
            dur = w["duration_us"] / 1e6
            errors = sum(w[k] for k in ("s4xx", "s5xx", "s409", "sother", "connect_errors", "read_errors",
                                        "write_errors", "timeouts"))
            row = {
                "claims_per_s": w["s200"] / dur,
                "p50_ms": w["p50_us"] / 1000,
                "p99_ms": w["p99_us"] / 1000,
                "errors": errors,
                "exhausted": w["distinct"] >= len(chunk) - 2,
                "cpu_ms_per_request": (cpu1 - cpu0) * 1000 / max(w["requests"], 1),
            }
            results[name].append(row)
            log(f"compare: round {round_no + 1} {name}: " + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
        if not args.no_pgbench:
            tps.append(pgbench_run(args.seconds, args.concurrency))
            log(f"compare: round {round_no + 1} pgbench {tps[-1]:.0f} tps")
    print("\n| config | claims/s | p50 ms | p99 ms | errors | ran out | gunicorn CPU ms/request |")
    print("|---|---|---|---|---|---|---|")
    for name, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in ("claims_per_s", "p50_ms", "p99_ms",
                                                                   "cpu_ms_per_request")}
        each = ", ".join(f"{r['claims_per_s']:.0f}" for r in rows)
        print(f"| {name} | {med['claims_per_s']:.0f} ({each}) "
              f"| {med['p50_ms']:.0f} | {med['p99_ms']:.0f} | {sum(r['errors'] for r in rows)} "
              f"| {'yes' if any(r['exhausted'] for r in rows) else 'no'} | {med['cpu_ms_per_request']:.2f} |")
    if tps:
        print(f"\npgbench tps per round: {', '.join(f'{t:.0f}' for t in tps)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
