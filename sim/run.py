"""Entry point: ``python -m sim.run [--scale tiny|default|full] [--seeds N] [--workers N] [--doc-only]``.

Generates each seed's month(s), runs every policy on them (real ones through the services, in
``--workers`` processes, each run on its own copy of the migrated template database, longest runs
first; modelled ones in this process meanwhile), writes ``sim/results/<policy>.json`` and regenerates
``docs/simulation.md`` with its figures. ``SIM_SCALE`` and ``SIM_SEED`` (the first seed; the others follow it) set the
defaults, so a run is reproducible.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import resource
import time
from pathlib import Path

from . import db
from .generator import SCALES, generate
from .policies import ALL_POLICIES, DEFAULT_SHADOW, MODELLED_RULES, POLICIES, sweep_specs

CLINICS = {"tiny": 1, "default": 1, "full": 3}
# Twelve one-practitioner months at the default scale: about 470 fillable cancellations pooled (issue #22
# asks for at least 400) in twelve independent clusters for the month bootstrap (sim/report.py).
SEEDS = {"tiny": 3, "default": 12, "full": 5}


def available(spec) -> bool:
    """Whether the product can run ``spec``: every policy field its ``extra`` sets exists (a feature-off run
    of a feature the product does not have yet is left out)."""
    if spec.modelled:
        return True
    from waitlist.policy.services import PUBLISHABLE_FIELDS

    return all(k in PUBLISHABLE_FIELDS for k in spec.extra)


def log(message: str) -> None:
    print(f"[sim {time.strftime('%H:%M:%S')}] {message}", flush=True)


def months(scale: str, seed: int):
    return [generate(seed, SCALES[scale], clinic) for clinic in range(CLINICS[scale])]


def expected_cost(spec) -> int:
    """A rough relative cost of a real run, to start the longest first: without a weekly cap a policy
    makes about twice the offers (and notices, expiries, cascades) of one with it."""
    return 2 if spec.weekly_offer_cap is None else 1


def jobs(scale: str, seeds: list[int], specs=None) -> list[tuple[str, int, int]]:
    """(policy, seed, clinic) of every real run, longest expected first (then in policy order)."""
    real = [p for p in (POLICIES if specs is None else specs) if not p.modelled and available(p)]
    todo = [(p.name, seed, clinic) for p in real for seed in seeds[: max(1, round(len(seeds) * p.months_share))]
            for clinic in range(CLINICS[scale])]
    costs = {p.name: expected_cost(p) for p in real}
    return sorted(todo, key=lambda job: -costs[job[0]])  # stable: policy, seed, clinic order otherwise


_STATE: dict = {}


def _init_worker(scale: str, shadow: dict, shadow_seed: int) -> None:
    db.configure_environment()
    import django

    django.setup()
    _STATE.update(scale=scale, shadow=shadow, shadow_seed=shadow_seed)


def _job(args) -> dict:
    """One real run in a worker process, on its own copy of the template database; metrics out."""
    index, (name, seed, clinic) = args
    from . import adapter, metrics
    from .engine import replay

    spec = next(p for p in [*ALL_POLICIES, *sweep_specs()] if p.name == name)
    if _STATE["shadow"] and name == "ours" and seed == _STATE["shadow_seed"] and clinic == 0:
        spec = dataclasses.replace(spec, shadow=_STATE["shadow"])
    month = generate(seed, SCALES[_STATE["scale"]], clinic)
    url = db.run_url(f"r{index}")
    db.create_run_database(url)
    db.use_database(url)
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    db_cpu = db.backend_cpu_seconds(pid)
    adapter.enable_waitlist()
    run_log, counters = replay(month, spec, f"{name}-{month.clinic_label}")
    result = metrics.compute(month, spec, run_log) | counters
    db_cpu_end = db.backend_cpu_seconds(pid)
    connection.close()
    out = {"policy": name, "seed": seed, "clinic": month.clinic_label, "metrics": result,
           "seconds": round(time.perf_counter() - started, 1), "database": url,
           "db_cpu_seconds": None if db_cpu is None or db_cpu_end is None else round(db_cpu_end - db_cpu, 1)}
    log(f"{name} seed {seed} {month.clinic_label}: fill {result['fill_rate']} "
        f"({result['filled']}/{result['fillable_cancellations']}) in {out['seconds']} s")
    return out


def _modelled(scale: str, seeds: list[int], specs) -> list[dict]:
    from . import metrics
    from .models import run_modelled

    out = []
    for spec in specs:
        for seed in seeds:
            for month in months(scale, seed):
                run_log, counters = run_modelled(month, spec, MODELLED_RULES)
                out.append({"policy": spec.name, "seed": seed, "clinic": month.clinic_label,
                            "metrics": metrics.compute(month, spec, run_log) | counters, "seconds": 0})
    return out


def run(scale: str, seeds: list[int], workers: int, shadow: dict | None = None,
        rebuild_template: bool = False, specs=None) -> list[dict]:
    """The real runs in a pool of ``workers`` processes, longest first, each taking the next run when it
    finishes one; the workers start (Django set-up) while this process checks or migrates the template,
    and the modelled policies run here while the pool works. Results in policy, seed, clinic order."""
    db.configure_environment()
    import django

    django.setup()
    db.use_database(db.sim_url())  # the settings read .env, which may name it
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers, initializer=_init_worker, initargs=(scale, shadow or {}, seeds[0])) as pool:
        started = time.perf_counter()
        migrated = db.prepare_template(rebuild=rebuild_template)
        log(f"template {db.db_name(db.sim_url())} {'migrated' if migrated else 'reused (migrations unchanged)'} "
            f"in {time.perf_counter() - started:.1f} s")
        specs = POLICIES if specs is None else specs
        pending = pool.imap_unordered(_job, list(enumerate(jobs(scale, seeds, specs))), chunksize=1)
        results = _modelled(scale, seeds, [p for p in specs if p.modelled])
        for result in pending:
            db.drop_run_database(result.pop("database"))
            results.append(result)
    order = [p.name for p in specs]
    return sorted(results, key=lambda r: (order.index(r["policy"]), r["seed"], r["clinic"]))


def cpu_seconds() -> float:
    """User + system CPU of this process (the template's migrate included) and its finished workers."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.run")
    parser.add_argument("--scale", default=os.environ.get("SIM_SCALE", "default"), choices=sorted(SCALES))
    parser.add_argument("--seeds", type=int, default=None, help="how many seeds (default 12; full 5)")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("SIM_WORKERS", "3")))
    parser.add_argument("--results", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--doc-only", action="store_true", help="only regenerate docs/simulation.md")
    parser.add_argument("--rebuild-template", action="store_true",
                        help="migrate the template database again even if the migrations did not change")
    parser.add_argument("--shadow", type=json.loads, default=DEFAULT_SHADOW, metavar="JSON",
                        help="a candidate policy observed in SHADOW beside ours on the first seed's month, e.g. "
                             '\'{"weekly_offer_cap": 1}\' (default: the contact limits off; \'{}\': none)')
    parser.add_argument("--headline", default=None, metavar="FILE",
                        help="also write the verdict's figures there (e.g. sim/results/other_seeds/seed101.json for a "
                             "SIM_SEED=101 run into another --results folder: docs/simulation.md shows them)")
    parser.add_argument("--sweep", action="store_true",
                        help="run the LEAD_TIME settings of policies.sweep_specs on the first --seeds months (default "
                             "4) into <results>/sweep/ instead of the policies (the page shows them beside ours)")
    args = parser.parse_args(argv)
    from . import report

    if args.sweep:
        first = int(os.environ.get("SIM_SEED", "1"))
        seeds = [first + i for i in range(args.seeds or 4)]
        started = time.perf_counter()
        log(f"sweep: scale {args.scale}, seeds {seeds}, {args.workers} workers")
        results = run(args.scale, seeds, args.workers, {}, args.rebuild_template, specs=sweep_specs())
        report.write_results(results, Path(args.results) / "sweep", scale=args.scale, seeds=seeds,
                             seconds=time.perf_counter() - started, cpu_seconds=cpu_seconds(), specs=sweep_specs())
    elif not args.doc_only:
        first = int(os.environ.get("SIM_SEED", "1"))
        seeds = [first + i for i in range(args.seeds or SEEDS[args.scale])]
        started = time.perf_counter()
        log(f"scale {args.scale}, seeds {seeds}, {args.workers} workers")
        results = run(args.scale, seeds, args.workers, args.shadow, args.rebuild_template)
        seconds, cpu = time.perf_counter() - started, cpu_seconds()
        db_cpu = [r["db_cpu_seconds"] for r in results if "db_cpu_seconds" in r]
        log(f"{seconds:.0f} s wall, {cpu:.0f} s CPU in Python"
            + (f", {sum(db_cpu):.0f} s in the PostgreSQL backends of the runs" if db_cpu and None not in db_cpu
               else " (PostgreSQL's own CPU not readable here)"))
        report.write_results(results, Path(args.results), scale=args.scale, seeds=seeds, seconds=seconds,
                             cpu_seconds=cpu)
        if args.headline:
            Path(args.headline).parent.mkdir(parents=True, exist_ok=True)
            Path(args.headline).write_text(json.dumps(report.headline(Path(args.results)), indent=1) + "\n")
    log(f"wrote {report.render_doc(Path(args.results))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
