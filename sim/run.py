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
from .assumptions import GROUPS, METRIC_ONLY, PESSIMISTIC, corner, corner_name
from .generator import SCALES, generate
from .policies import ALL_POLICIES, DEFAULT_SHADOW, MODELLED_RULES, POLICIES, sweep_specs

CLINICS = {"tiny": 1, "default": 1, "full": 3}
# Twelve one-practitioner months at the default scale: about 470 fillable cancellations pooled (issue #22
# asks for at least 400) in twelve independent clusters for the month bootstrap (sim/report.py).
SEEDS = {"tiny": 3, "default": 12, "full": 5}
# The headline's months: held out from tuning. Every default of ours was chosen on seeds 1-12 (``TUNING_SEEDS``);
# ``make simulate`` reports seeds 101-112 unless SIM_SEED says otherwise.
TUNING_SEEDS = list(range(1, 13))
HELD_OUT_FIRST_SEED = 101
# Sensitivity corners (issue #41): each assumption group at its low and high values, one at a time, ours on the
# first ``SIM_CORNER_MONTHS`` months (the modelled competitors on the same months); the pessimistic corner (every
# group at its declared side) ours on the first third of the months and FIFO on the first (the 5-minute budget:
# the central runs take most of it; ``SIM_PESSIMISTIC_SHARE`` and ``SIM_PESSIMISTIC_FIFO_SHARE`` widen them).
CORNER_MONTHS = int(os.environ.get("SIM_CORNER_MONTHS", "1"))
CORNER_POLICIES = ("ours",)
PESSIMISTIC_POLICIES = {"ours": float(os.environ.get("SIM_PESSIMISTIC_SHARE", "0.34")),
                        "fifo": float(os.environ.get("SIM_PESSIMISTIC_FIFO_SHARE", "0"))}  # shares of months


def available(spec) -> bool:
    """Whether the product can run ``spec``: every policy field its ``extra`` sets exists (a feature-off run
    of a feature the product does not have yet is left out)."""
    if spec.modelled:
        return True
    from waitlist.policy.services import PUBLISHABLE_FIELDS

    return all(k in PUBLISHABLE_FIELDS for k in spec.extra)


def log(message: str) -> None:
    print(f"[sim {time.strftime('%H:%M:%S')}] {message}", flush=True)


def months(scale: str, seed: int, sides: dict | None = None):
    params = corner(SCALES[scale], sides or {})
    return [generate(seed, params, clinic) for clinic in range(CLINICS[scale])]


def expected_cost(spec) -> int:
    """A rough relative cost of a real run, to start the longest first: without a weekly cap a policy
    makes about twice the offers (and notices, expiries, cascades) of one with it."""
    return 2 if spec.weekly_offer_cap is None else 1


Job = tuple[str, int, int, str]  # policy, seed, clinic, corner (JSON of {group: side}; "{}" central)


def jobs(scale: str, seeds: list[int], specs=None, sides: dict | None = None, names=None,
         n_months: int | None = None) -> list[Job]:
    """(policy, seed, clinic, corner) of every real run, longest expected first (then in policy order)."""
    real = [p for p in (POLICIES if specs is None else specs) if not p.modelled and available(p)
            and (names is None or p.name in names)]
    key = json.dumps(sides or {}, sort_keys=True)
    todo = [(p.name, seed, clinic, key)
            for p in real for seed in seeds[: n_months or max(1, round(len(seeds) * p.months_share))]
            for clinic in range(CLINICS[scale])]
    costs = {p.name: expected_cost(p) for p in real}
    return sorted(todo, key=lambda job: -costs[job[0]])  # stable: policy, seed, clinic order otherwise


def corner_jobs(scale: str, seeds: list[int]) -> list[Job]:
    """Ours on the first CORNER_MONTHS months at every run-changing group's low and high values."""
    out: list[Job] = []
    for group in corner_groups():
        if group in METRIC_ONLY:
            continue
        for side in ("low", "high"):
            out += jobs(scale, seeds, sides={group: side}, names=CORNER_POLICIES, n_months=CORNER_MONTHS)
    return out


def corner_groups() -> list[str]:
    """The groups whose one-at-a-time corners run: all, or those ``SIM_CORNER_GROUPS`` names (comma-separated)."""
    named = [g for g in os.environ.get("SIM_CORNER_GROUPS", "").split(",") if g]
    return [g for g in GROUPS if not named or g in named]


RESCORED = {f"{group}_{side}" for group in METRIC_ONLY for side in ("low", "high")}  # copies, not runs


def rescore(month, spec, run_log) -> dict:
    """The run scored again at each metric-only group's low and high values (they change no event, only the
    draws the metrics make): corner name → metrics."""
    from . import metrics

    out = {}
    for group in METRIC_ONLY:
        for side in ("low", "high"):
            sides = {group: side}
            other = dataclasses.replace(month, params=corner(month.params, sides)).index()
            out[corner_name(sides)] = metrics.compute(other, spec, run_log)
    return out


_STATE: dict = {}


def quiet_gc() -> None:
    """A run allocates millions of short-lived ORM objects and few cycles: the start-up objects are frozen out of
    the collector and young collections run far less often (measured: several percent of a run's CPU)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _init_worker(scale: str, shadow: dict, shadow_seed: int) -> None:
    db.configure_environment()
    import django

    django.setup()
    quiet_gc()
    _STATE.update(scale=scale, shadow=shadow, shadow_seed=shadow_seed)


def _job(args) -> dict:
    """One real run in a worker process, on its own copy of the template database; metrics out."""
    index, (name, seed, clinic, key) = args
    from . import adapter, metrics
    from .engine import replay

    sides = json.loads(key)
    cache = os.environ.get("SIM_CACHE")  # a folder of finished runs (a rerun of the same code reuses them)
    cached = Path(cache) / f"{name}-{seed}-{clinic}-{corner_name(sides)}.pickle" if cache else None
    if cached is not None and cached.exists():
        import pickle

        return pickle.loads(cached.read_bytes())
    spec = next(p for p in [*ALL_POLICIES, *sweep_specs()] if p.name == name)
    if _STATE["shadow"] and name == "ours" and seed == _STATE["shadow_seed"] and clinic == 0 and not sides:
        spec = dataclasses.replace(spec, shadow=_STATE["shadow"])
    month = generate(seed, corner(SCALES[_STATE["scale"]], sides), clinic)
    url = db.run_url(f"r{index}")
    db.create_run_database(url)
    db.use_database(url)
    from django.db import connection

    started, own = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    db_cpu = db.backend_cpu_seconds(pid)
    adapter.enable_waitlist()
    run_log, counters = replay(month, spec, f"{name}-{month.clinic_label}")
    result = metrics.compute(month, spec, run_log) | counters
    db_cpu_end = db.backend_cpu_seconds(pid)
    connection.close()
    end = resource.getrusage(resource.RUSAGE_SELF)
    py_cpu = end.ru_utime + end.ru_stime - own.ru_utime - own.ru_stime
    out = {"policy": name, "seed": seed, "clinic": month.clinic_label, "metrics": result,
           "corner": corner_name(sides), "seconds": round(time.perf_counter() - started, 1), "database": url,
           "db_cpu_seconds": None if db_cpu is None or db_cpu_end is None else round(db_cpu_end - db_cpu, 1),
           "py_cpu_seconds": round(py_cpu, 1)}
    if not sides:
        out["rescored"] = rescore(month, spec, run_log)
    if cached is not None:
        import pickle

        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(pickle.dumps(out))
    log(f"{name} seed {seed} {month.clinic_label} [{out['corner']}]: attended {result['filled_attended']}/"
        f"{result['fillable_cancellations']} (filled {result['filled']}) in {out['seconds']} s")
    return out


def _modelled(scale: str, seeds: list[int], specs, sides: dict | None = None) -> list[dict]:
    from . import metrics
    from .models import run_modelled

    out = []
    for spec in specs:
        for seed in seeds:
            for month in months(scale, seed, sides):
                run_log, counters = run_modelled(month, spec, MODELLED_RULES)
                result = {"policy": spec.name, "seed": seed, "clinic": month.clinic_label,
                          "corner": corner_name(sides or {}),
                          "metrics": metrics.compute(month, spec, run_log) | counters, "seconds": 0}
                if not sides:
                    result["rescored"] = rescore(month, spec, run_log)
                out.append(result)
    return out


def _lead(results: list[dict], corner_label: str, seeds: list[int]) -> float | None:
    """Ours minus the best competitor, attended visits over fillable pooled over ``seeds`` (the competitors
    present at that corner), in points."""
    from .policies import COMPETITORS

    def pooled(name):
        runs = [r for r in results if r["policy"] == name and r["corner"] == corner_label and r["seed"] in seeds]
        if len({r["seed"] for r in runs}) < len(seeds):
            return None
        fillable = sum(r["metrics"]["fillable_cancellations"] for r in runs)
        return sum(r["metrics"]["filled_attended"] for r in runs) / fillable if fillable else None

    ours = pooled("ours")
    others = [v for v in (pooled(c) for c in COMPETITORS) if v is not None]
    return None if ours is None or not others else 100 * (ours - max(others))


def pessimistic_sides(results: list[dict], seeds: list[int]) -> dict[str, str]:
    """Each group at the side whose one-at-a-time corner gave ours the smaller lead over the best competitor
    (on the corner months, the same competitors at both sides; a tie takes ``high``)."""
    sides = {}
    for group in GROUPS:
        low, high = _lead(results, f"{group}_low", seeds), _lead(results, f"{group}_high", seeds)
        sides[group] = "low" if low is not None and high is not None and low < high else "high"
    return sides


def with_rescored(results: list[dict]) -> list[dict]:
    """The metric-only corners as results of their own (from the central runs' ``rescored``)."""
    out = []
    for r in results:
        for name, metrics in r.pop("rescored", {}).items():
            out.append({k: v for k, v in r.items() if k not in ("metrics", "corner")} | {"corner": name,
                                                                                         "metrics": metrics})
    return results + out


def run(scale: str, seeds: list[int], workers: int, shadow: dict | None = None,
        rebuild_template: bool = False, specs=None, corners: bool = False) -> list[dict]:
    """The real runs in a pool of ``workers`` processes, longest first, each taking the next run when it
    finishes one; the workers start (Django set-up) while this process checks or migrates the template,
    and the modelled policies run here while the pool works. With ``corners``: the one-at-a-time corners with
    the central runs, then the pessimistic corner. Results in policy, seed, clinic order."""
    db.configure_environment()
    import django

    django.setup()
    db.use_database(db.sim_url())  # the settings read .env, which may name it
    ctx = multiprocessing.get_context("spawn")
    specs = POLICIES if specs is None else specs
    modelled = [p for p in specs if p.modelled]
    with ctx.Pool(workers, initializer=_init_worker, initargs=(scale, shadow or {}, seeds[0])) as pool:
        started = time.perf_counter()
        migrated = db.prepare_template(rebuild=rebuild_template)
        log(f"template {db.db_name(db.sim_url())} {'migrated' if migrated else 'reused (migrations unchanged)'} "
            f"in {time.perf_counter() - started:.1f} s")
        sides = PESSIMISTIC
        pessimistic = [j for name, share in PESSIMISTIC_POLICIES.items()
                       for j in jobs(scale, seeds, specs, sides=sides, names=(name,),
                                     n_months=max(1, round(share * len(seeds))))] if corners else []
        todo = ([] if os.environ.get("SIM_ONLY_CORNERS") else jobs(scale, seeds, specs)) + pessimistic + (
            corner_jobs(scale, seeds) if corners else [])
        if os.environ.get("SIM_ONLY_CACHED"):  # render what SIM_CACHE holds (a run cut short by the machine's load)
            cache = Path(os.environ["SIM_CACHE"])
            todo = [j for j in todo
                    if (cache / f"{j[0]}-{j[1]}-{j[2]}-{corner_name(json.loads(j[3]))}.pickle").exists()]
            log(f"only the {len(todo)} cached runs")
        pending = pool.imap_unordered(_job, list(enumerate(todo)), chunksize=1)
        results = _modelled(scale, seeds, modelled)
        if corners:
            for group in corner_groups():
                if group not in METRIC_ONLY:
                    for side in ("low", "high"):
                        results += _modelled(scale, seeds[:CORNER_MONTHS], modelled, {group: side})
            results += _modelled(scale, seeds[: round(PESSIMISTIC_POLICIES["ours"] * len(seeds))], modelled, sides)
        for result in pending:
            db.drop_run_database(result.pop("database"))
            results.append(result)
        results = with_rescored(results)
        for r in results:
            if r["corner"] == "pessimistic":
                r["sides"] = sides
        if corners:
            log(f"pessimistic corner (declared): {sides}; measured one at a time: "
                f"{pessimistic_sides(results, seeds[:CORNER_MONTHS])}")
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
    parser.add_argument("--no-corners", action="store_true", help="skip the sensitivity corners")
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
        first = int(os.environ.get("SIM_SEED", str(HELD_OUT_FIRST_SEED)))
        seeds = [first + i for i in range(args.seeds or SEEDS[args.scale])]
        started = time.perf_counter()
        load_before = os.getloadavg()
        log(f"scale {args.scale}, seeds {seeds}, {args.workers} workers, corners {not args.no_corners} "
            f"(one-at-a-time on {CORNER_MONTHS} month(s), pessimistic on the first "
            f"{PESSIMISTIC_POLICIES}), load {os.getloadavg()}")
        results = run(args.scale, seeds, args.workers, args.shadow, args.rebuild_template,
                      corners=not args.no_corners)
        seconds, cpu = time.perf_counter() - started, cpu_seconds()
        db_cpu = [r["db_cpu_seconds"] for r in results if "db_cpu_seconds" in r]
        log(f"{seconds:.0f} s wall, {cpu:.0f} s CPU in Python"
            + (f", {sum(db_cpu):.0f} s in the PostgreSQL backends of the runs" if db_cpu and None not in db_cpu
               else " (PostgreSQL's own CPU not readable here)"))
        import pickle
        import tempfile

        # Kept until the files are written, so a failure after an hour of runs loses nothing.
        raw = Path(tempfile.gettempdir()) / "sim-last-results.pickle"
        raw.write_bytes(pickle.dumps((results, seeds, seconds, cpu, load_before)))
        log(f"raw results in {raw}")
        central = [r for r in results if r.get("corner", "central") == "central"]
        report.write_results(central, Path(args.results), scale=args.scale, seeds=seeds, seconds=seconds,
                             cpu_seconds=cpu, load=load_before)
        if not args.no_corners:
            from . import trust

            sens = trust.sensitivity(results, seeds, CORNER_MONTHS)
            real = [r for r in results if "db_cpu_seconds" in r and r["corner"] not in RESCORED]
            sens["cost"] = {"real_runs": len(real), "wall_seconds": round(seconds, 1), "cpu_seconds_python":
                            round(cpu, 1), "statements": sum(r["metrics"].get("statements") or 0 for r in real),
                            "db_cpu_seconds": round(sum(r["db_cpu_seconds"] or 0 for r in real), 1),
                            "load_average_at_start": load_before, "load_average_at_end": os.getloadavg()}
            (Path(args.results) / "sensitivity.json").write_text(json.dumps(sens, indent=1, sort_keys=True) + "\n")
        if args.headline:
            Path(args.headline).parent.mkdir(parents=True, exist_ok=True)
            Path(args.headline).write_text(json.dumps(report.headline(Path(args.results)), indent=1) + "\n")
    log(f"wrote {report.render_doc(Path(args.results))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
