"""Entry point: ``python -m sim.run [--scale tiny|default|full] [--seeds N] [--workers N] [--doc-only]``.

Generates each seed's month(s), runs every policy on them (real ones through the services, in
``--workers`` processes, each with its own copy of a freshly migrated simulation database; modelled
ones in this process), writes ``sim/results/<policy>.json`` and regenerates ``docs/simulation.md``
with its figures. ``SIM_SCALE`` and ``SIM_SEED`` (the first seed; the others follow it) set the
defaults, so a run is reproducible.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from . import db
from .generator import SCALES, generate
from .policies import POLICIES

CLINICS = {"tiny": 1, "default": 1, "full": 3}
SEEDS = {"tiny": 3, "default": 3, "full": 5}


def log(message: str) -> None:
    print(f"[sim {time.strftime('%H:%M:%S')}] {message}", flush=True)


def months(scale: str, seed: int):
    return [generate(seed, SCALES[scale], clinic) for clinic in range(CLINICS[scale])]


def _worker(args) -> list[dict]:
    """One process, one database: the real runs assigned to it, metrics out."""
    url, scale, jobs, shadow = args
    os.environ["SIM_DATABASE_URL"] = url
    db.configure_environment()
    import django

    django.setup()
    from . import adapter, metrics
    from .engine import replay
    from .policies import POLICIES

    specs = {p.name: dataclasses.replace(p, shadow=shadow) if shadow and p.name == "ours" else p for p in POLICIES}
    adapter.enable_waitlist()
    out = []
    for seed, name in jobs:
        spec = specs[name]
        for month in months(scale, seed):
            started = time.perf_counter()
            run_log, counters = replay(month, spec, f"{name}-{month.clinic_label}")
            result = metrics.compute(month, spec, run_log) | counters
            out.append({"policy": name, "seed": seed, "clinic": month.clinic_label, "metrics": result,
                        "seconds": round(time.perf_counter() - started, 1)})
            log(f"{name} seed {seed} {month.clinic_label}: fill {result['fill_rate']} "
                f"({result['filled']}/{result['fillable_cancellations']}) in {out[-1]['seconds']} s")
    return out


def _modelled(scale: str, seeds: list[int], specs) -> list[dict]:
    from . import metrics
    from .models import run_modelled

    out = []
    for spec in specs:
        for seed in seeds:
            for month in months(scale, seed):
                run_log, counters = run_modelled(month, spec)
                out.append({"policy": spec.name, "seed": seed, "clinic": month.clinic_label,
                            "metrics": metrics.compute(month, spec, run_log) | counters, "seconds": 0})
    return out


def prepare_databases(workers: int) -> list[str]:
    """Migrate a template once, then one copy per worker (reconcile and the outbox span a database,
    so parallel runs must not share one)."""
    import psycopg

    from bench.db import admin_dsn, db_name, url_with_db

    base = db.sim_url()
    db.recreate_database()
    env = dict(os.environ, DATABASE_URL=base, LOG_LEVEL="ERROR")
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], check=True, env=env)
    urls = []
    with psycopg.connect(admin_dsn(base), autocommit=True) as conn:
        for i in range(workers):
            name = f"{db_name(base)}_w{i}"
            db.check_name(name)
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{db_name(base)}"')
            # A throwaway database: commits need not wait for the disk (a crash only loses the run).
            conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
            urls.append(url_with_db(base, name))
    return urls


def run(scale: str, seeds: list[int], workers: int, shadow: dict | None = None) -> list[dict]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    db.configure_environment()
    import django

    django.setup()
    specs = POLICIES
    real = [(seed, p.name) for p in specs if not p.modelled for seed in seeds]
    urls = prepare_databases(workers)
    shards = [(urls[i], scale, real[i::workers], shadow or {}) for i in range(workers)]
    results = _modelled(scale, seeds, [p for p in specs if p.modelled])
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers) as pool:
        for part in pool.map(_worker, shards):
            results.extend(part)
    return results


def cpu_seconds() -> float:
    """User + system CPU of this process and its finished workers (the migrate subprocess included)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.run")
    parser.add_argument("--scale", default=os.environ.get("SIM_SCALE", "default"), choices=sorted(SCALES))
    parser.add_argument("--seeds", type=int, default=None, help="how many seeds (default 3; full 5)")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("SIM_WORKERS", "2")))
    parser.add_argument("--results", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--doc-only", action="store_true", help="only regenerate docs/simulation.md")
    parser.add_argument("--shadow", type=json.loads, default=None, metavar="JSON",
                        help='observe a candidate policy in SHADOW beside ours, e.g. \'{"weekly_offer_cap": 1}\'')
    args = parser.parse_args(argv)
    from . import report

    if not args.doc_only:
        first = int(os.environ.get("SIM_SEED", "1"))
        seeds = [first + i for i in range(args.seeds or SEEDS[args.scale])]
        started = time.perf_counter()
        log(f"scale {args.scale}, seeds {seeds}, {args.workers} workers")
        results = run(args.scale, seeds, args.workers, args.shadow)
        seconds, cpu = time.perf_counter() - started, cpu_seconds()
        log(f"{seconds:.0f} s wall, {cpu:.0f} s CPU in Python (PostgreSQL's own CPU not included)")
        report.write_results(results, Path(args.results), scale=args.scale, seeds=seeds, seconds=seconds,
                             cpu_seconds=cpu)
    log(f"wrote {report.render_doc(Path(args.results))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
