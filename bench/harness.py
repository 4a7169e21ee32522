"""Shared benchmark machinery: machine facts, statistics, result files, the markdown doc and plots.

Every figure is the median of at least three runs with min and max; every absolute figure is reported
with the machine it came from; comparisons are ratios measured within one run.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
DOC_PATH = ROOT / "docs" / "benchmarks.md"
PLOTS_DIR = ROOT / "docs" / "benchmarks"

MIN_RUNS = 3

# --- scale -------------------------------------------------------------------------------------

SCALES: dict[str, dict] = {
    # A few minutes on 2 cores.
    "quick": {
        "runs": 3,
        "matcher_sizes": [10_000, 25_000, 50_000],
        "matcher_spread": (50_000, 100),  # entries, clinics
        "matcher_samples": 40,
        "contention_vacancies": 200,
        "contention_dispatchers": 32,
        # Supply for every wrk second at up to ~750 claims/s (a run that runs out is flagged: supply-limited).
        "claims_offers": 3_000,
        "claims_seconds": 4,
        "claims_concurrency": 32,
        "pgbench_scale": 10,
        # Enough that every throughput run lasts a few seconds at 1 and at 2 processes (about 1,400 quiet
        # jobs/s, 500 real-work jobs/s and 300 Procrastinate jobs/s per process on 2 cores).
        "reeval_jobs": 6_000,
        "reeval_real_jobs": 500,
        "procrastinate_jobs": 1_000,
        "fairness_big": 30_000,
        "fairness_small_clinics": 99,
        "fairness_small_jobs": 10,
        "console_rows": 10_000,
        "console_requests": 10,
        "storm_cancellations": 400,
        "storm_seconds": 20,
        "storm_pgbench_seconds": 8,
        "storm_big_entries": 10_000,
        "storm_small_entries": 1_000,
        "clinics_counts": [10, 100, 1_000],
    },
    # The sizes: under 40 minutes on 2 cores.
    "full": {
        "runs": 3,
        "matcher_sizes": [10_000, 100_000, 1_000_000],
        "matcher_spread": (1_000_000, 100),
        "matcher_samples": 200,
        "contention_vacancies": 1_000,
        "contention_dispatchers": 32,
        "claims_offers": 20_000,
        "claims_seconds": 30,
        "claims_concurrency": 32,
        "pgbench_scale": 10,
        "reeval_jobs": 20_000,
        "reeval_real_jobs": 1_500,
        "procrastinate_jobs": 2_500,
        "fairness_big": 100_000,
        "fairness_small_clinics": 99,
        "fairness_small_jobs": 10,
        "console_rows": 10_000,
        "console_requests": 20,
        "storm_cancellations": 5_000,
        "storm_seconds": 120,
        "storm_pgbench_seconds": 15,
        "storm_big_entries": 30_000,
        "storm_small_entries": 3_000,
        "clinics_counts": [10, 100, 1_000],
    },
}


def scale_name() -> str:
    name = os.environ.get("BENCH_SCALE", "quick")
    if name not in SCALES:
        raise SystemExit(f"BENCH_SCALE must be one of {sorted(SCALES)}, not {name!r}")
    return name


def scale() -> dict:
    return SCALES[scale_name()]


# --- machine -----------------------------------------------------------------------------------


def machine_info() -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": mem_gib,
        "postgresql": pg_version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def machine_line(m: dict) -> str:
    load = "/".join(str(x) for x in m.get("load_average_at_start", []))
    return (
        f"{m['cores']} cores ({m.get('cpu_model') or 'unknown CPU'}), {m.get('memory_gib')} GiB, "
        f"PostgreSQL {m['postgresql']}, Python {m['python']}, load average at start {load}"
    )


# --- statistics --------------------------------------------------------------------------------


def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank-with-interpolation percentile (p in 0..100)."""
    data = sorted(values)
    if not data:
        return math.nan
    if len(data) == 1:
        return data[0]
    k = (len(data) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


@dataclass
class Stat:
    """The median, min and max of one figure over the runs."""

    runs: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else math.nan

    def as_dict(self) -> dict:
        return {
            "median": self.median,
            "min": min(self.runs) if self.runs else math.nan,
            "max": max(self.runs) if self.runs else math.nan,
            "runs": self.runs,
        }


def stat(runs: Iterable[float]) -> dict:
    return Stat(list(runs)).as_dict()


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and math.isnan(value):
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def fmt_stat(s: dict | None, digits: int = 3) -> str:
    """``median (min–max)``."""
    if not s:
        return "–"
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)})"


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def jain(values: list[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one takes everything."""
    if not values:
        return math.nan
    total = sum(values)
    squares = sum(v * v for v in values)
    return (total * total) / (len(values) * squares) if squares else math.nan


# --- results -----------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    title: str
    tables: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)
    status: str = "ok"

    def table(self, title: str, columns: list[str], rows: list[list]) -> None:
        self.tables.append({"title": title, "columns": columns, "rows": rows})

    def note(self, text: str) -> None:
        self.notes.append(text)


def write_result(result: Result, *, machine: dict, seconds: float) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{result.name}.json"
    payload = {
        "name": result.name,
        "title": result.title,
        "status": result.status,
        "scale": scale_name(),
        "scale_config": scale(),
        "machine": machine,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(seconds, 1),
        "tables": result.tables,
        "notes": result.notes,
        "plots": result.plots,
        "data": result.data,
    }
    path.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
    return path


def _json_default(value):
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


# --- plots -------------------------------------------------------------------------------------


def plot(filename: str, draw: Callable) -> str:
    """Draw with matplotlib (headless) into docs/benchmarks/<filename>; returns the doc-relative path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    PLOTS_DIR.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    draw(fig, ax)
    fig.tight_layout()
    fig.savefig(PLOTS_DIR / filename)
    plt.close(fig)
    return f"benchmarks/{filename}"


# --- the doc -----------------------------------------------------------------------------------

ORDER = ["matcher", "contention", "claims", "reevaluation", "console", "storm", "clinics"]

INTRO = """# Benchmarks

`make bench` (or `BENCH_SCALE=full make bench`) builds its own data in a separate database
(`BENCH_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/clinic_waitlist_bench`, dropped and
recreated on every run), runs the benchmarks below, writes `bench/results/<name>.json` and regenerates
this page and its plots (`docs/benchmarks/*.png`). `python -m bench.run --only NAME` runs one
benchmark and rewrites this page from every result file present. Benchmarks are not part of
`make test` and assert no timings: they measure.

```sh
make bench                      # quick scale: smaller data (each section below shows its wall time)
BENCH_SCALE=full make bench     # the issue's sizes
BENCH_ARGS="--only matcher" make bench
```

`make bench` needs PostgreSQL and Redis up (`BENCH_DATABASE_URL`, `REDIS_URL`, default
`redis://127.0.0.1:6379/7`). It installs the project with the `test` and `bench` extras into `.venv`
(`matplotlib`, `procrastinate`), and Debian's `wrk` (HTTP load generator, driven by
`bench/claims.lua`) and `pgbench` (`postgresql-client`) with apt when they are missing. Load is sent
only to 127.0.0.1 and every load loop is bounded in requests and time. Code: `bench/` (`run.py` the
entry point, `harness.py` machine facts, statistics, this page and the plots, `db.py` the bulk data
builders, one module per benchmark).

How to read the numbers:

* every figure is **median (min–max)** over at least three runs;
* absolute figures hold for the machine named in each section (cores, PostgreSQL version, and the
  load average when the run started: other work sharing the machine makes them noisier);
* comparisons with a peer or with the database's own limit are **ratios measured in the same run**,
  so they travel better between machines than the absolute figures;
* the machine may be shared: each section gives the load average when its benchmark started (on a
  2-core machine anything above 2 means other work was competing for the cores, which lowers the
  absolute figures and widens min–max; same-run ratios suffer less);
* `BENCH_SCALE=quick` (the default) uses smaller data so it finishes in under 10 minutes on 2 cores;
  `BENCH_SCALE=full` uses the issues' sizes (1M entries, 1,000 vacancies, 30 s of claims, 5,000 cancellations
  in 2 minutes) in under 40. The result files committed with this page come from one `BENCH_SCALE=full make
  bench` from a fresh clone (commit `6347a58`, 2026-12-04, the install included, a 2-core machine idle but for
  the run): **28 min 22 s** (matcher 361 s, contention 56, claims 546, reevaluation 145, console 9, storm 502,
  clinics 29). That machine is slower than the one of 2026-12-01 to 03 on anything that sends many small
  statements (one claim alone in process 3.8 ms against 2.6, pgbench 3,200–3,600 tps against 4,300–4,450), so compare
  absolute figures with care; earlier on the same day, before the storm's reductions, the same full run took
  35 min 54 s there and its storm did not keep up (31.5 notices a second against 41.7 cancellations, 61.5 ms of
  CPU a cancellation; docs below, "The storm"). A quick `make bench` from a fresh clone took 6 min 48 s at
  `6347a58` (8 min 22 s before the reductions).
  Run one part with `BENCH_ARGS="--only NAME"`. The entry lock convoy that once made the full contention
  benchmark alone take about 18 minutes is gone.
* **The storm and the thousand-clinic sweep run on databases of their own** (`bench/run.py` `OWN_DATABASE`): in
  a run of several benchmarks each is a child `bench.run --only NAME` on `<bench database>_storm` or
  `_clinics`, created and migrated for it. Their deployment's beat works on every clinic in its database: in the
  shared one it found the reevaluation benchmark's queued jobs and some 70,000 outbox rows no worker had
  delivered, so the quick storm's worker spent 77 ms of CPU a cancellation instead of 18, one run's first
  notice p50 was 4.4 s at 16 a second, every drain waited out its 20 s, and the sweep's `deliver-outbox` tick
  measured 101 statements instead of 3.
* **Before and after issues 22 and 23** (the fill work and the architecture renovation): `BENCH_SCALE=quick`,
  the five benchmarks of issue 15, run back to back on one 2-core machine on 2026-12-02 (idle but for the
  run; load average 0.5–4 at their starts), first from commit `c94003f` (the code these committed results
  were measured on), then from the renovated code. That machine was slower than the one of the committed
  results (pgbench about 2,100 tps there against 4,450), so compare the two columns with each other, not
  with the sections below. Median (min–max) of three runs:

  | figure | before (c94003f) | after | |
  | --- | --- | --- | --- |
  | matcher p50 at 100,000 entries (ms) | 5.6 (5.15–6.28) | 4.19 (3.53–4.42) | peer ÷ ours 1,294 → 1,349 |
  | matcher growth 10k → 100k | ×1.46 | ×1.1 | |
  | dispatch, 1 dispatcher (offers/s) | 72.1 (71.8–84.4) | 93.5 (71.1–96.4) | |
  | dispatch, 32 dispatchers (offers/s) | 142 (134–142) | 172 (135–184) | ratio 1.86 → 1.97 |
  | claims/s over HTTP | 219 (216–246) | 333 (230–334) | ÷ pgbench 0.118 → 0.16 |
  | claims p99 (ms) | 321 (205–927) | 136 (131–280) | 0 errors in both |
  | one claim in process (ms) | 6.89 (6.61–9.65) | 7.15 (6.19–10.4) | within the spread |
  | reevaluation, 1 process (jobs/s) | 1,208 (1,157–1,222) | 1,494 (1,180–1,549) | ÷ Procrastinate 4.77 → 4.53 |
  | reevaluation, real work, 1 process (jobs/s) | 31.4 (28.9–34.1) | 35 (26.8–37.4) | |
  | console waitlist page p50 (ms) | 97.4 (91.6–110) | 73.5 (67.8–77.5) | |
  | console reevaluation page p50 (ms) | 70 (63.5–74.5) | 91.3 (81.7–93.4) | see below |

  The one figure outside its spread, the reevaluation page, was measured again A/B on one database of the same
  shape (three rounds of 30 requests each, old code then new): p50 83–89 ms before, 60–72 ms after, so the
  bench's difference was the machine's noise, not the code. No figure is worse than before by more than the
  run-to-run spread. Rerunning that comparison found one breakage: the reevaluation benchmark's hand-written
  HELD appointments lacked the cancel-reason columns of scheduling migration 0010 (fixed; `tests/bench/test_fixtures.py`
  now writes every bulk fixture against the current schema in `make test`).
"""


def render_doc() -> Path:
    results = {}
    for path in sorted(RESULTS_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        results[data["name"]] = data
    lines = [INTRO]
    scales = sorted({r["scale"] for r in results.values()})
    if results:
        lines.append(
            "**The numbers on this page** come from the result files committed with it: scale "
            + ", ".join(f"`{s}`" for s in scales)
            + " (each section says which), measured on the machine each section names. "
            "They are a snapshot of that machine, not a promise for yours: run `make bench` to get your own.\n"
        )
    summary = _summary(results)
    if summary:
        lines.append("## Summary\n")
        lines.append("| benchmark | headline (median, min–max) | against |")
        lines.append("| --- | --- | --- |")
        lines += summary
        lines.append("")
    targets = _targets(results)
    if targets:
        lines.append("## Issue 15's targets, as these result files measure them\n")
        lines.append("| target | measured (median of the runs) | met |")
        lines.append("| --- | --- | --- |")
        lines += [f"| {what} | {measured} | {'yes' if ok else '**no**'} |" for what, measured, ok in targets]
        lines.append("")
    targets27 = _targets_27(results)
    if targets27:
        lines.append("## Issue 27's targets (the storm and a thousand clinics), as these result files measure them\n")
        lines.append("| target | measured (median of the runs) | met |")
        lines.append("| --- | --- | --- |")
        lines += [f"| {what} | {measured} | {'yes' if ok else '**no**'} |" for what, measured, ok in targets27]
        lines.append("")
    if results:
        lines.append(
            "Runs behind these numbers: "
            + ", ".join(
                f"{n} `{results[n]['scale']}` ({results[n]['wall_seconds']:.0f} s, {results[n]['finished_at'][:16]})"
                for n in ORDER
                if n in results
            )
            + ".\n"
        )
    lines.append("Contents: " + " · ".join(f"[{results[n]['title']}](#{n})" for n in ORDER if n in results) + "\n")
    for name in ORDER + sorted(set(results) - set(ORDER)):
        r = results.get(name)
        if r is None:
            continue
        lines.append(f'<a id="{name}"></a>\n\n## {r["title"]}\n')
        lines.append(
            f"Scale `{r['scale']}` · machine: {machine_line(r['machine'])} · finished {r['finished_at']} "
            f"· {r['wall_seconds']} s wall · raw: [`bench/results/{name}.json`](../bench/results/{name}.json)\n"
        )
        if r.get("status") != "ok":
            lines.append(f"**Status: {r['status']}**\n")
        for table in r["tables"]:
            lines.append(f"**{table['title']}**\n")
            lines.append("| " + " | ".join(table["columns"]) + " |")
            lines.append("| " + " | ".join("---" for _ in table["columns"]) + " |")
            for row in table["rows"]:
                lines.append("| " + " | ".join(str(c) for c in row) + " |")
            lines.append("")
        for p in r["plots"]:
            lines.append(f"![{name}]({p})\n")
        for note in r["notes"]:
            lines.append(note.rstrip() + "\n")
    DOC_PATH.write_text("\n".join(lines).rstrip() + "\n")
    return DOC_PATH


def _summary(results: dict) -> list[str]:
    """One line per benchmark with its headline figure and its comparison (missing keys are skipped)."""
    out = []

    def get(name, *keys):
        value = results.get(name, {}).get("data", {})
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value

    try:
        m = results.get("matcher", {}).get("data", {})
        sizes = [k for k, v in m.items() if isinstance(v, dict) and "ours_p50_ms" in v]
        if sizes:
            big = max(sizes, key=lambda k: (m[k]["clinics"] == 1, m[k]["entries"]))
            out.append(
                f"| matcher | {fmt_stat(m[big]['ours_p50_ms'])} ms p50 at {big}; "
                f"growth ×{fmt(m['growth_ours']['median'])} "
                f"over the size range | peer (load all, filter in memory) {fmt_stat(m[big]['peer_p50_ms'])} ms: "
                f"×{fmt(m[big]['peer_over_ours_p50']['median'])} slower |"
            )
        c = get("contention", "offers_per_s_many")
        if c:
            ok = get("contention", "invariants_ok_every_run")
            out.append(
                f"| contention | {fmt_stat(c)} offers/s with 32 dispatchers; invariants "
                f"{'held in every run' if ok else '**broken**'} | 1 dispatcher alone: "
                f"{fmt_stat(get('contention', 'offers_per_s_one'))} offers/s |"
            )
        h = get("claims", "claims_per_s")
        if h:
            ran_out = get("claims", "runs_exhausted")
            supply = f" (**offers ran out in {ran_out} run(s): supply-limited, a lower bound**)" if ran_out else ""
            out.append(
                f"| claims over HTTP | {fmt_stat(h)} claims/s{supply}, p99 {fmt_stat(get('claims', 'p99_ms'))} ms, "
                f"errors {fmt_stat(get('claims', 'errors'))} | pgbench {fmt_stat(get('claims', 'pgbench_tps'))} tps: "
                f"ratio {fmt_stat(get('claims', 'ratio'))} |"
            )
        r = get("reevaluation", "throughput")
        if r:
            one, two = r.get("1") or r.get(1), r.get("2") or r.get(2)
            fair = get("reevaluation", "fairness")
            out.append(
                f"| reevaluation | {fmt_stat(one['ours'])} jobs/s (1 process), {fmt_stat(two['ours'])} (2); "
                f"Jain per cycle {fmt(fair['fair']['jain_first_cycle']['median'])}, worst small-clinic wait "
                f"{fmt(fair['fair']['worst_small_wait_rounds']['median'])} rounds | Procrastinate no-op "
                f"{fmt_stat(one['procrastinate'])} jobs/s (ratio {fmt(one['ratio']['median'])}); FIFO: Jain "
                f"{fmt(fair['fifo']['jain_first_cycle'])}, wait {fmt(fair['fifo']['worst_small_wait_rounds'])} rounds |"
            )
        k = results.get("console")
        if k:
            parts = []
            for name, v in k.get("data", {}).items():
                parts.append(
                    f"`{name}`: "
                    + (f"{fmt_stat(v['p50_ms'])} ms p50" if v.get("available") else "not available in this build")
                )
            out.append(f"| console | {'; '.join(parts)} | – |")
        st = results.get("storm", {}).get("data")
        if st:
            fn = st["first_notice_ms"]
            out.append(
                f"| storm | {st['cancellations']:,} cancellations in {st['seconds']} s: first notice p50 "
                f"{fmt_stat(fn['p50'])} ms, p99 {fmt_stat(fn['p99'])} ms, {fmt_stat(st['notices_per_s'])} notices/s | "
                f"pgbench {fmt_stat(st['pgbench_tps'])} tps (same run) |"
            )
        k = results.get("clinics", {}).get("data")
        if k:
            last = str(k["counts"][-1])
            worst = max(k["figures"][last].items(), key=lambda kv: kv[1]["sql_ms"])
            out.append(
                f"| clinics | at {int(last):,} clinics the costliest tick or request is `{worst[0]}`: "
                f"{fmt(worst[1]['sql_ms'])} ms SQL, {fmt(worst[1]['statements'])} statements | "
                f"{k['counts'][0]:,} clinics: {fmt(k['figures'][str(k['counts'][0])][worst[0]]['sql_ms'])} ms |"
            )
    except (KeyError, TypeError, ValueError):
        pass
    return out


def _targets_27(results: dict) -> list[tuple[str, str, bool]]:
    """Issue 27's targets beside the figures that judge them (missing results are skipped)."""
    rows: list[tuple[str, str, bool]] = []
    try:
        st = results.get("storm", {}).get("data")
        if st:
            full = st["cancellations"] >= 5_000 and st["seconds"] <= 120
            at = "" if full else f" ({st['cancellations']:,} in {st['seconds']} s here)"
            fn = st["first_notice_ms"]
            p50, p99 = fn["p50"]["median"], fn["p99"]["median"]
            rows.append((f"storm: first notice p50 ≤ 2 s, p99 ≤ 10 s{at}", f"p50 {fmt(p50)} ms, p99 {fmt(p99)} ms",
                         full and p50 <= 2000 and p99 <= 10_000))
            c99, errors = st["claim_ms"]["p99"]["median"], st["claim_errors"]["max"]
            rows.append(("storm: claim p99 ≤ 200 ms, 0 errors",
                         f"p99 {fmt(c99)} ms, errors {fmt(errors)} (most of any run)", c99 <= 200 and errors == 0))
            k99 = st["console_ms"]["p99"]["median"]
            rows.append(("storm: console waitlist page p99 ≤ 500 ms", f"{fmt(k99)} ms", k99 <= 500))
            ratio = st["small_p99_over_big_p99"]["median"]
            rows.append(("storm: small clinics' p99 ≤ 2 × the big clinic's", f"×{fmt(ratio)}", ratio <= 2))
            ok = st["invariants_ok_every_run"]
            rows.append(("storm: every invariant held after every run", "held" if ok else "broken", bool(ok)))
        k = results.get("clinics", {}).get("data")
        if k:
            counts = [str(c) for c in k["counts"]]
            first, last = counts[0], counts[-1]
            factor = int(last) / int(first)
            worst_growth, worst_name = 0.0, ""
            over_second = []
            for name, f in k["figures"][last].items():
                base = k["figures"][first][name]["sql_ms"]
                growth = f["sql_ms"] / base if base else 0.0
                if growth > worst_growth:
                    worst_growth, worst_name = growth, name
                if f["sql_ms"] > 1000:
                    over_second.append(name)
            rows.append((f"clinics: nothing grows faster than linearly ({int(first):,} → {int(last):,} clinics, "
                         f"×{factor:,.0f})", f"largest SQL-time growth ×{fmt(worst_growth)} (`{worst_name}`)",
                         worst_growth <= factor))
            rows.append((f"clinics: ≤ 1 s of SQL per run at {int(last):,} clinics",
                         "over: " + ", ".join(f"`{n}`" for n in over_second) if over_second else "all under",
                         not over_second))
            flat = [n for n, f in k["figures"][last].items() if n in k.get("beat_jobs", [])
                    and f["max_statements"] > k["figures"][first][n]["max_statements"]]
            rows.append(("clinics: a quiet clinic costs a beat tick no statement (also asserted in `make test`)",
                         "statements per tick grew: " + ", ".join(flat) if flat else "statements per tick constant",
                         not flat))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        pass
    return rows


def _targets(results: dict) -> list[tuple[str, str, bool]]:
    """Each of issue 15's same-run targets beside the figure that judges it (missing results are skipped)."""
    rows: list[tuple[str, str, bool]] = []

    def data(name: str) -> dict:
        return results.get(name, {}).get("data", {})

    try:
        c = data("claims")
        if c:
            ratio, p50, p99, errors = (c[k]["median"] for k in ("ratio", "p50_ms", "p99_ms", "errors"))
            rows.append(("claims/s ≥ 0.10 × pgbench tps (same run)", f"{fmt(ratio)}", ratio >= 0.10))
            rows.append(("claims p99 ≤ 3 × p50, 0 errors", f"p99 {fmt(p99)} ms, p50 {fmt(p50)} ms "
                         f"(×{fmt(p99 / p50)}), errors {fmt(errors)}", p99 <= 3 * p50 and errors == 0))
            statements = max(r["probe"]["queries"] for r in c["runs"])
            rows.append(("one claim ≤ 10 SQL statements (also asserted in `make test`)",
                         f"{statements} (the most of any run)", statements <= 10))
        r = data("reevaluation").get("throughput", {})
        if r.get("1") and r.get("2"):
            ratio = r["1"]["ratio"]["median"]
            rows.append(("reevaluation, 1 process ≥ 1.0 × Procrastinate no-op jobs/s", f"×{fmt(ratio)}", ratio >= 1.0))
            scaling = r.get("ours_2_over_1", {}).get("median") or r["2"]["ours"]["median"] / r["1"]["ours"]["median"]
            rows.append(("reevaluation, 2 processes ≥ 1.6 × 1", f"×{fmt(scaling)}", scaling >= 1.6))
        m = data("matcher")
        one_clinic = [v for v in m.values() if isinstance(v, dict) and v.get("clinics") == 1 and "ours_p50_ms" in v]
        if one_clinic:
            big = max(one_clinic, key=lambda v: v["entries"])
            p50, p99 = big["ours_p50_ms"]["median"], big["ours_p99_ms"]["median"]
            at = f"at {big['entries']:,} entries"
            full = big["entries"] >= 1_000_000
            rows.append((f"matcher p99 ≤ 3 × p50 at 1,000,000 entries ({at} here)",
                         f"p99 {fmt(p99)} ms, p50 {fmt(p50)} ms (×{fmt(p99 / p50)})", full and p99 <= 3 * p50))
            growth = m["growth_ours"]["median"]
            rows.append((f"matcher p50 growth 10k → 1M ≤ 1.5 ({at} here)", f"×{fmt(growth)}", full and growth <= 1.5))
        k = data("contention")
        if k:
            one, ratio = k["offers_per_s_one"]["median"], k["ratio_many_over_one"]["median"]
            rows.append(("dispatch, 1 dispatcher ≥ 100 offers/s", f"{fmt(one)} offers/s", one >= 100))
            rows.append(("dispatch, 32 racing ≥ 1 alone (invariants after every run)", f"×{fmt(ratio)}",
                         ratio >= 1.0 and bool(k.get("invariants_ok_every_run"))))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        pass
    return rows


def log(message: str) -> None:
    print(f"[bench {datetime.now().astimezone().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
