"""Entry point: ``python -m bench.run [--only NAME ...] [--keep-db] [--doc-only]``.

Recreates the bench database (``BENCH_DATABASE_URL``), migrates it, runs the benchmarks, writes
``bench/results/<name>.json`` and regenerates ``docs/benchmarks.md`` from every result file present.
``BENCH_SCALE`` is ``quick`` (default) or ``full``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time
import traceback

from . import db

BENCHMARKS = {
    "matcher": "bench.matcher",
    "contention": "bench.contention",
    "claims": "bench.claims",
    "reevaluation": "bench.reevaluation",
    "console": "bench.console",
    "storm": "bench.storm",
    "clinics": "bench.clinics",
}
#: Benchmarks that run the deployment's beat: in a run of several, each gets a database of its own (a child
#: ``bench.run --only NAME`` on ``<bench database>_<NAME>``), so beat's jobs see only its world and not what the
#: others leave behind (reevaluation jobs still queued, offers due to expire, outbox rows no worker delivered).
OWN_DATABASE = ("storm", "clinics")


def _in_own_database(name: str) -> bool:
    """Run ``name`` in a child process on a database of its own; True when it succeeded."""
    url = db.url_with_db(db.bench_url(), f"{db.db_name(db.bench_url())}_{name}")
    env = {**os.environ, "BENCH_DATABASE_URL": url}
    return subprocess.run([sys.executable, "-m", "bench.run", "--only", name], env=env).returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run")
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS), help="run only this benchmark")
    parser.add_argument("--keep-db", action="store_true", help="reuse the bench database (no drop/recreate)")
    parser.add_argument("--doc-only", action="store_true", help="only regenerate docs/benchmarks.md")
    args = parser.parse_args(argv)

    db.configure_environment()
    from .harness import log, machine_info, render_doc, scale_name, write_result

    if args.doc_only:
        log(f"wrote {render_doc()}")
        return 0
    if not args.keep_db:
        log(f"recreating {db.db_name(db.bench_url())}")
        db.recreate_database(db.bench_url())
    import django

    django.setup()
    if not args.keep_db:
        # The bench's cache outlives the bench database: figures kept per clinic id (fairness, readiness) from an
        # earlier run's database would be shown, and refreshed in the middle of a storm, as this one's.
        db.forget_cached()
    log("migrating")
    db.migrate()
    machine = machine_info()
    log(f"scale {scale_name()} on {machine}")
    failures = 0
    names = args.only or list(BENCHMARKS)
    for name in names:
        if name in OWN_DATABASE and len(names) > 1:
            log(f"=== {name} (a database of its own)")
            start = time.perf_counter()
            failures += 0 if _in_own_database(name) else 1
            log(f"{name}: {time.perf_counter() - start:.0f} s")
            continue
        module = importlib.import_module(BENCHMARKS[name])
        log(f"=== {name}")
        machine = machine_info()  # per benchmark: the load average when it started
        start = time.perf_counter()
        try:
            result = module.run()
        except Exception:  # noqa: BLE001 - one benchmark failing must not lose the others' results
            failures += 1
            log(f"{name} FAILED:\n{traceback.format_exc()}")
            continue
        path = write_result(result, machine=machine, seconds=time.perf_counter() - start)
        log(f"{name}: {time.perf_counter() - start:.0f} s -> {path}")
        render_doc()
    log(f"wrote {render_doc()}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
