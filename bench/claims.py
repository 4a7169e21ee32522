"""3. Claims over HTTP: the app under gunicorn on loopback, wrk (Lua script) at concurrency 32 over
distinct offers plus 10 % replays; in the same run pgbench's TPC-B-like tps on the same PostgreSQL,
reported as the ratio claims/s ÷ pgbench tps."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from . import db
from .claims_layers import LAYERS, post_claim, profile_claims
from .harness import ROOT, Result, fmt_stat, log, scale, stat
from .offers import OFFER_WORLDS, make_offers

HOST = "127.0.0.1"
GUNICORN_CONFIG = "bench/gunicorn_claims.py"
WRK_THREADS = 2
REPLAY_EVERY = 10
PROBE_CLAIMS = 20  # claimed in process before the HTTP run, one at a time
#: Runs after the first make this many times the offers the first one claimed (never more than the scale's
#: ``claims_offers``): making offers through dispatch is most of this benchmark's wall time, and a slower
#: machine claims fewer. A run that still runs out is flagged supply-limited.
SUPPLY_MARGIN = 1.5


def _pgbench_db() -> str:
    """pgbench's database, named after the bench database so two checkouts never drop each other's."""
    return f"{db.db_name(db.bench_url())}_pgbench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_gunicorn(port: int, *, app: str = "config.wsgi:application", env_over: dict[str, str] | None = None
                   ) -> subprocess.Popen:
    """gunicorn on loopback with ``GUNICORN_CONFIG``, once it answers (``env_over``: settings to compare)."""
    env = dict(os.environ)
    env.setdefault("DATABASE_CONN_MAX_AGE", "300")  # as the web tier runs under `make run`
    # One token sends every request: the per-user throttle (still run: one Redis call a request) must not be
    # what is measured. At the default 6,000/min, warm-up and claims past ~5,000 a run answered 429.
    env.setdefault("API_THROTTLE_USER", "10000000/min")
    env["PYTHONWARNINGS"] = "ignore"
    env.update(env_over or {})
    cmd = [str(Path(sys.executable).parent / "gunicorn"), app, "--bind", f"{HOST}:{port}", "-c", GUNICORN_CONFIG]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://{HOST}:{port}/api/v1/clinics/", timeout=2)
            return proc
        except urllib.error.HTTPError:
            return proc  # 401: the app answers
        except OSError:
            time.sleep(0.3)
    stop(proc)
    raise RuntimeError("gunicorn did not start")


def gunicorn_settings() -> dict:
    """What ``GUNICORN_CONFIG`` resolves to in this environment (for the report)."""
    import runpy

    cfg = runpy.run_path(str(ROOT / GUNICORN_CONFIG))
    return {"workers": cfg["workers"], "worker_class": cfg["worker_class"], "threads": cfg["threads"]}


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_wrk(port: int, offers: list[tuple[str, str]], token: str, seconds: int, concurrency: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for clinic_ref, ref in offers:
            f.write(f"/api/v1/clinics/{clinic_ref}/offers/{ref}/claim bench-claim-{ref}\n")
        path = f.name
    try:
        cmd = [
            "wrk",
            "-t",
            str(WRK_THREADS),
            "-c",
            str(concurrency),
            "-d",
            f"{seconds}s",
            "--timeout",
            "10s",
            "-s",
            str(ROOT / "bench" / "claims.lua"),
            f"http://{HOST}:{port}",
            "--",
            path,
            str(WRK_THREADS),
            token,
            str(REPLAY_EVERY),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    finally:
        os.unlink(path)
    line = next((x for x in out.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no result: {out.stdout[-2000:]} {out.stderr[-2000:]}")
    return json.loads(line.split(" ", 1)[1])


def probe_claims(offers: list[tuple[str, str]], token: str) -> dict:
    """Claims one after another through Django's test client (in process, no concurrency): the status
    and SQL statements of the first, and per claim the median wall time and the part of it spent
    inside ``cursor.execute`` (statement round trips; the rest is Python: WSGI, DRF, token auth,
    the service, JSON, plus COMMIT)."""
    import statistics

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    sql_s = [0.0]

    def timed(execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            sql_s[0] += time.perf_counter() - start

    client = Client()
    statuses, totals, in_sql, queries = [], [], [], None
    for clinic_ref, ref in offers:
        sql_s[0] = 0.0
        with CaptureQueriesContext(connection) as q, connection.execute_wrapper(timed):
            start = time.perf_counter()
            response = post_claim(client, clinic_ref, ref, token, f"bench-probe-{ref}")
            totals.append((time.perf_counter() - start) * 1000)
        in_sql.append(sql_s[0] * 1000)
        statuses.append(response.status_code)
        queries = len(q.captured_queries) if queries is None else queries
    return {
        "status": max(statuses),
        "queries": queries,
        "ms": statistics.median(totals),
        "sql_ms": statistics.median(in_sql),
        "claims": len(offers),
    }


def warm_up(port: int, token: str) -> None:
    """Two seconds of GET /api/v1/clinics/ so every worker has imported and connected before timing."""
    subprocess.run(
        [
            "wrk",
            "-t",
            "1",
            "-c",
            "8",
            "-d",
            "2s",
            "-H",
            f"Authorization: Token {token}",
            f"http://{HOST}:{port}/api/v1/clinics/",
        ],
        capture_output=True,
        timeout=60,
    )


def pgbench_init(scale_factor: int) -> None:
    import psycopg

    url = db.url_with_db(db.bench_url(), _pgbench_db())
    with psycopg.connect(db.admin_dsn(db.bench_url()), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{_pgbench_db()}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{_pgbench_db()}"')
    subprocess.run(["pgbench", "-i", "-q", "-s", str(scale_factor), url], check=True, capture_output=True)


def pgbench_run(seconds: int, clients: int) -> float:
    url = db.url_with_db(db.bench_url(), _pgbench_db())
    out = subprocess.run(
        ["pgbench", "-n", "-c", str(clients), "-j", "2", "-T", str(seconds), url],
        check=True,
        capture_output=True,
        text=True,
        timeout=seconds + 120,
    )
    match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out.stdout) or re.search(
        r"tps = ([0-9.]+)", out.stdout
    )
    return float(match.group(1))


def check_claims(clinics) -> dict:
    rows = db.sql(
        """SELECT
             (SELECT count(*) FROM waitlist_offer WHERE clinic_id = ANY(%(c)s) AND status = 'ACCEPTED'),
             (SELECT count(*) FROM waitlist_offerclaimreceipt WHERE clinic_id = ANY(%(c)s)),
             (SELECT count(*) FROM scheduling_capacityhold WHERE clinic_id = ANY(%(c)s) AND status = 'ACCEPTED'),
             (SELECT count(*) FROM waitlist_waitlistentry WHERE clinic_id = ANY(%(c)s) AND status = 'ACCEPTED')""",
        {"c": [c.pk for c in clinics]},
    )[0]
    return dict(zip(["offers_accepted", "claim_receipts", "holds_accepted", "entries_accepted"], rows, strict=True))


def supply_note(d: dict) -> str:
    """Whether the runs measured the server or ran out of offers (a wrk thread stops when its share does)."""
    runs = d["runs"]
    ran_out = [i + 1 for i, r in enumerate(runs) if r["exhausted"]]
    if not ran_out:
        return (
            f"**Supply.** No run ran out of offers (at most {max(r['distinct'] for r in runs):,} distinct claims "
            f"of {min(r['offers_available'] for r in runs):,} offers): every run measured the server for its "
            f"full duration. Runs after the first were made {SUPPLY_MARGIN} × the offers the first one claimed, "
            "at most `claims_offers` (making them through dispatch is most of this benchmark's time)."
        )
    return (
        f"**Supply-limited: offers ran out in run(s) {', '.join(map(str, ran_out))}.** wrk stops a thread when "
        "its share of the offers is used up, so those runs measured the supply, not the server: their claims/s "
        "is a lower bound and their duration is shorter than asked. Raise `claims_offers` "
        "(`bench/harness.py` SCALES) and rerun."
    )


def reading_note(d: dict) -> str:
    """The "Reading it" paragraph, from a run's data (also used to refresh a stored result's prose)."""
    runs = d["runs"]
    ratio = d["ratio"]["median"]
    probe_ms = stat(r["probe"]["ms"] for r in runs)["median"]
    probe_sql_ms = stat(r["probe"].get("sql_ms", 0) for r in runs)["median"]
    statements = stat(r["probe"]["queries"] for r in runs)["median"]
    return (
        f"**Reading it.** A claim is one HTTP request and one transaction that locks vacancy → offer → hold → "
        f"entry, checks owner, state, version, expiry, the hold's allocation and the decision, writes four rows "
        f"(offer, hold, entry, event), a claim receipt and an idempotency receipt: several times the work of one "
        f"TPC-B transaction (three updates, one insert), plus Django, DRF, token authentication and the "
        f"guardian scope check in Python. The ratio {ratio:.2f} says how much of the database's raw transaction "
        f"rate a claim gets on this machine. One claim is {statements:.0f} SQL statements, the whole HTTP request "
        f"(asserted in order in `tests/waitlist/test_claim_queries.py`; 27 before issue 15, 10 before the token "
        f"cache and the savepoint-free receipt): the token (read once per worker and `API_TOKEN_CACHE_SECONDS`, "
        f"so under wrk almost never), the scope (clinic and roles in one query), BEGIN, the idempotency "
        f"receipt's INSERT, one statement that locks the whole chain (`FOR NO KEY UPDATE OF` vacancy, offer, "
        f"hold, entry, in that order) and reads the policy, the allocation and the latest decision with it, one "
        f"statement for every write (chained compare-and-set updates, the event and the claim receipt), the "
        f"receipt's UPDATE, COMMIT. Django's connection health check (`CONN_HEALTH_CHECKS`, a `SELECT 1` before "
        f"the first query of a request on a kept connection) is not counted there (until issue 42 a connection "
        f"used within the last second skipped it: removed, see \"Fast paths kept and removed\" below). "
        f"Where the time of "
        f"one claim goes (in process, alone, median of {PROBE_CLAIMS}): {probe_ms:.1f} ms in all, "
        f"{probe_sql_ms:.1f} ms of it inside `cursor.execute` (round trips and PostgreSQL's work), the rest "
        f"Python; the per-layer table splits it. Under wrk, the gunicorn processes, PostgreSQL and wrk share 2 "
        f"cores (with any other work on the machine: see the load average), so throughput is bounded by the CPU "
        f"a claim costs, Python and PostgreSQL alike, and with 32 requests in flight latency is mostly queueing "
        f"(p50 ≈ concurrency ÷ throughput); sync workers take requests from one listen queue in arrival order, "
        f"which keeps p99 near p50. Connections are reused (`DATABASE_CONN_MAX_AGE=300`, as under `make run`, "
        f"with health checks after idleness); psycopg's pool (`psycopg_pool` is installed) was not measured: with one "
        f"persistent connection per sync worker it would save no connects, only cap the server's backends when "
        f"many hosts share one PostgreSQL. Every request carries the same token, so the per-user throttle is "
        f"raised for the server under test (`API_THROTTLE_USER=10000000/min`; it still runs, one Redis call a "
        f"request): at the default 6,000 a minute a run past ~5,000 requests measured 429 answers, not claims."
    )


def layers_note() -> str:
    """Where the CPU of a claim went before and after issue 15 target 1 (measured, not recomputed per run)."""
    return (
        "**Where the CPU goes, per layer (issue 15 target 1).** Measured by CPU time rather than wall time, "
        "because the machine was shared while this was done: `python -m bench.claims_layers N --cprofile` "
        "(cProfile over N in-process claims) and, under wrk at concurrency 32, the CPU seconds of the gunicorn "
        "workers and of the PostgreSQL backends divided by the requests. *Before*: 20.6 ms of Python CPU per "
        "claim under cProfile (2.7 million function calls for 145 claims), two thirds of it the ORM building "
        "and compiling two statements on every request — the lock chain (`select_related` over five tables, "
        "the newest-decision subquery, the allocation `EXISTS`; ~5 ms, more than PostgreSQL spends running it) "
        "and the scope query (its `RawSQL` codenames; ~1 ms) — plus a Redis pipeline object built per request "
        "for the throttle; PostgreSQL then parsed and planned every statement again (steady-state `EXPLAIN "
        "ANALYZE`: the lock statement plans in 0.8 ms and runs in 0.2 ms, the scope query 0.3 ms against "
        "0.04 ms, the write statement 0.25 ms against 0.05 ms), 4.2–4.4 ms of PostgreSQL CPU per claim under "
        "wrk. *After*: the two statements are compiled once per process (`common/fastpath/prepared.py`, "
        "`PreparedQuery`: the ORM's SQL byte for byte, the same converters and instances), the receipt's UPDATE "
        "is fixed text, and the lock chain, the scope, the receipt's INSERT and UPDATE and the write statement "
        "are server-side prepared statements, planned once per connection (psycopg `prepare=True`; not behind "
        "a transaction-mode pooler, `DATABASE_POOLER_TRANSACTION_MODE`); the throttle is one `EVALSHA` (INCR, "
        "and EXPIRE when it created the key). Python: 7.8 ms CPU per claim under cProfile (620,000 calls for "
        "145 claims); PostgreSQL: 1.6–2.6 ms CPU per claim under wrk. *What is left*: under wrk the gunicorn "
        "workers still spend 4.5–8 ms of CPU per claim against ~3 ms for the same claim in process: the HTTP "
        "parse and a new TCP connection per request (sync workers do not keep connections alive), Django's "
        "request cycle and the middleware chain (~0.5–0.8 ms, sessions, locale, CSRF, messages, HTMX and CSP "
        "included although an API request uses none of them), DRF's request wrapping and parsing, one Redis "
        "round trip for the throttle and eight PostgreSQL round trips (seven statements and the health check), "
        "each a system call pair and a context switch on 2 cores shared with wrk and PostgreSQL. The API-only "
        "middleware chain and the health check after idleness came next (below); still open: folding the "
        "scope query into the receipt INSERT's round trip, and fewer round trips per claim (a pipeline of "
        "BEGIN, INSERT and the lock statement)."
    )


#: Issue 42's same-run A/B of the lean API chain and the health check after idleness (both removed), measured
#: with ``bench.claims_compare`` on a shared machine; kept verbatim with the figures it reports.
FASTPATH_AB_NOTE = (
    "**Fast paths kept and removed (issue 42).** Two of issue 15's fast paths had to show more than 15 % "
    "on claims in a same-run A/B to stay: the lean API chain (`common/fastpath/lean_api.py`: token-"
    "authenticated `/api/` requests through a second middleware chain built by swapping "
    "`settings.MIDDLEWARE` at start-up) and the health check after idleness "
    "(`common/fastpath/health_checks.py`: Django's per-request `SELECT 1` skipped for a connection used "
    "within `DATABASE_HEALTH_CHECK_IDLE_SECONDS`). Measured with `python -m bench.claims_compare --reuse`"
    " on 2026-12-06 (sync × 4, concurrency 32, 6 s per run, arms interleaved and their order reversed "
    "every round; the lean chain off: Django's `WSGIHandler` behind the same `honour_connection_close`; "
    "the health trick off: `DATABASE_HEALTH_CHECK_IDLE_SECONDS=0`), on a 2-core machine shared with four "
    "other sessions (load average 12–17, pgbench 650–1,240 tps between rounds, against 1,800–3,500 in the"
    " runs above), so single runs swing by 2–4×: two batches of the four arms (8 rounds) and one batch of"
    " the two ends alone (6 rounds), 0 errors, no run out of offers."
    "\n"
    "\n"
    "| arm | runs | claims/s median (min–max) | p50 ms | p99 ms | gunicorn CPU ms/request |"
    "\n"
    "| --- | --- | --- | --- | --- | --- |"
    "\n"
    "| both on (as before) | 14 | 54 (17–111) | 489 (275–1,798) | 937 (384–5,012) | 6.44 (5.28–22.95) |"
    "\n"
    "| lean chain off | 8 | 51 (23–70) | 550 (372–1,103) | 1,060 (715–2,425) | 6.66 (5.46–8.79) |"
    "\n"
    "| health trick off | 8 | 43 (15–80) | 663 (349–1,618) | 1,209 (750–3,806) | 6.70 (5.38–13.26) |"
    "\n"
    "| both off (plain Django) | 14 | 54 (37–148) | 542 (212–780) | 919 (369–1,685) | 6.20 (5.27–7.39) |"
    "\n"
    "\n"
    "Paired within each round (the two arms run back to back), both on ÷ both off: claims/s 1.04 "
    "(0.23–1.92), p50 1.01 (0.55–4.42), CPU per request 0.99 (0.84–4.14) over 14 rounds; the ABAB batch "
    "alone 0.77 (0.23–1.12). Each trick's own effect changes sign with the other's state (the lean chain "
    "1.33 with the health trick on, 0.88 with it off; the health trick 1.19 with the lean chain on, 0.93 "
    "with it off): noise, not a gain. Issue 15 had measured +24 % and +47 % on a quieter machine with two"
    " rounds each; neither held here, and the CPU a request costs in gunicorn, the steadier figure on a "
    "shared machine, is the same either way. Both are removed: `config.wsgi` serves Django's "
    "`WSGIHandler`, every request takes the whole middleware chain, and Django checks a kept connection "
    "before each request's first query. Kept (not measured again here: their gains are the ones recorded "
    "above and in the storm's section): the prepared statements and compiled-once querysets on the claim "
    "and dispatch paths, the dispatch slots and the per-pool Redis client (`common/fastpath/README.md`)."
)


def web_tier_note() -> str:
    """What issue 15 target 2 changed in the web tier, and what each part was worth (measured, not recomputed)."""
    return (
        "**The web tier (issue 15 target 2).** Measured back to back with `python -m bench.claims_compare` "
        "(the same wrk script and concurrency, each configuration 5 s per round over its own slice of "
        "`vacancy_dispatch` offers, two rounds in alternating order, CPU seconds of the gunicorn processes "
        "from `/proc`; a shared machine, so medians of two): Django's plain handler, sync × 4, a health check "
        "per request: 97 claims/s (124, 71), p50 307 ms, 6.0 ms gunicorn CPU per request; with the lean API "
        "chain (`common/fastpath/lean_api.py`: a token-authenticated `/api/` request skips the session, CSRF, "
        "authentication, session-lifetime, message, HTMX, CSP and WhiteNoise middleware; the correlation id, "
        "metrics, security headers, junk guard, locale and `CommonMiddleware` stay; every other request, the "
        "console and session-authenticated API calls included, keeps the full chain): 120 (131, 108), 5.4 ms; "
        "plus the health check only after a second of idleness: 176 (185, 167), p50 153 ms, 4.6 ms. Worker "
        "models with both: sync × 2 157 (132, 182), 3.7 ms; gthread 2 × 4 threads (keep-alive) 183 (185, "
        "180), 3.5 ms, but a p99 of 3.5 × p50 in one round; sync × 4 stays (same throughput within the noise, "
        "p99 within 3 × p50 in both rounds; a later quieter pair of comparisons: sync × 4 321 and 305 claims/s, "
        "sync × 3 320 and 321, gthread 2 × 4 297). Logging costs nothing per claim here: the claim's INFO line is "
        "below the bench's `LOG_LEVEL=WARNING` and gunicorn writes no access log under the bench. The benchmark "
        "itself, before and after, minutes apart (quick scale, 4,000 offers a run, none ran out): 109 (96–140) "
        "claims/s, p50 281 ms, p99 565 ms, pgbench 1,821 tps, ratio 0.057 (0.053–0.075) → 205 (169–301) "
        "claims/s, p50 161 ms, p99 238 ms, pgbench 2,304 tps, ratio 0.087 (0.073–0.148)."
    )


def run() -> Result:
    from scheduling.models import Role
    from scheduling.services import clinic_grant_role

    cfg = scale()
    seconds, conc, n = cfg["claims_seconds"], cfg["claims_concurrency"], cfg["claims_offers"]
    result = Result("claims", f"3. Claims over HTTP: gunicorn on loopback, concurrency {conc}")
    missing = [tool for tool in ("wrk", "pgbench") if shutil.which(tool) is None]
    if missing:
        result.status = f"skipped: {', '.join(missing)} not installed (make bench installs them with apt)"
        return result
    log("claims: pgbench -i")
    pgbench_init(cfg["pgbench_scale"])
    runs = []
    supply = n
    for run_no in range(cfg["runs"]):
        log(f"claims: run {run_no + 1}: making {supply:,} offers through vacancy_dispatch")
        clinics, offers = make_offers(f"h{run_no}", supply)
        user, token = db.staff_user(clinics[0], f"bench-claims-{run_no}")
        for other in clinics[1:]:
            clinic_grant_role(clinic=other, user=user, role=Role.STAFF)
        probe = probe_claims(offers[:PROBE_CLAIMS], token)
        layers = profile_claims(offers[PROBE_CLAIMS : 2 * PROBE_CLAIMS], token)
        offers = offers[2 * PROBE_CLAIMS :]
        port = free_port()
        from django.db import connections

        connections.close_all()
        server = start_gunicorn(port)
        try:
            warm_up(port, token)
            log(f"claims: run {run_no + 1}: wrk {seconds} s at concurrency {conc} over {len(offers):,} offers")
            w = run_wrk(port, offers, token, seconds, conc)
        finally:
            stop(server)
        log(f"claims: run {run_no + 1}: pgbench {seconds} s at {conc} clients")
        tps = pgbench_run(seconds, conc)
        w["duration_s"] = w["duration_us"] / 1e6
        w["claims_per_s"] = w["s200"] / w["duration_s"]
        w["distinct_claims_per_s"] = (w["requests"] - w["replays"]) / w["duration_s"]
        w["errors"] = (
            w["s4xx"]
            + w["s5xx"]
            + w["s409"]
            + w["sother"]
            + w["connect_errors"]
            + w["read_errors"]
            + w["write_errors"]
            + w["timeouts"]
        )
        w["pgbench_tps"] = tps
        w["ratio"] = w["claims_per_s"] / tps
        w["offers_available"] = len(offers)
        w["probe"] = probe
        w["layers"] = layers
        w["exhausted"] = w["distinct"] >= len(offers) - WRK_THREADS
        w["database"] = check_claims(clinics)
        runs.append(w)
        if run_no == 0 and not w["exhausted"]:
            supply = min(n, int(SUPPLY_MARGIN * (w["distinct"] + 2 * PROBE_CLAIMS)) + conc)
        log(
            f"claims: run {run_no + 1}: {w['claims_per_s']:.0f} claims/s, p99 {w['p99_us'] / 1000:.0f} ms, "
            f"errors {w['errors']}, pgbench {tps:.0f} tps, db {w['database']}"
            + (" — OFFERS RAN OUT: supply-limited, claims/s is a lower bound" if w["exhausted"] else "")
        )
    d = {
        "runs": runs,
        "claims_per_s": stat(r["claims_per_s"] for r in runs),
        "distinct_claims_per_s": stat(r["distinct_claims_per_s"] for r in runs),
        "p50_ms": stat(r["p50_us"] / 1000 for r in runs),
        "p95_ms": stat(r["p95_us"] / 1000 for r in runs),
        "p99_ms": stat(r["p99_us"] / 1000 for r in runs),
        "errors": stat(r["errors"] for r in runs),
        "pgbench_tps": stat(r["pgbench_tps"] for r in runs),
        "ratio": stat(r["ratio"] for r in runs),
        "duration_s": stat(r["duration_s"] for r in runs),
        "gunicorn": gunicorn_settings(),
        "runs_exhausted": sum(1 for r in runs if r["exhausted"]),
    }
    result.data = d
    result.table(
        "Claims (POST …/offers/{ref}/claim with an Idempotency-Key) and pgbench on the same PostgreSQL",
        ["figure", "value: median (min–max)"],
        [
            ["claims/s (HTTP 200, replays included)", fmt_stat(d["claims_per_s"])],
            ["distinct claims/s", fmt_stat(d["distinct_claims_per_s"])],
            ["latency p50 (ms)", fmt_stat(d["p50_ms"])],
            ["latency p95 (ms)", fmt_stat(d["p95_ms"])],
            ["latency p99 (ms)", fmt_stat(d["p99_ms"])],
            ["errors (non-200 answers, socket errors, timeouts)", fmt_stat(d["errors"])],
            ["one claim alone, in process: SQL statements", fmt_stat(stat(r["probe"]["queries"] for r in runs))],
            [
                f"one claim alone, in process: ms (median of {PROBE_CLAIMS})",
                fmt_stat(stat(r["probe"]["ms"] for r in runs)),
            ],
            ["… of which inside `cursor.execute` (ms)", fmt_stat(stat(r["probe"].get("sql_ms", 0) for r in runs))],
            ["measured seconds (a run stops early if its offers run out)", fmt_stat(d["duration_s"])],
            [f"pgbench TPC-B-like tps (-c {conc} -j 2, scale {cfg['pgbench_scale']})", fmt_stat(d["pgbench_tps"])],
            ["**claims/s ÷ pgbench tps** (same run)", fmt_stat(d["ratio"])],
        ],
    )
    layer_rows = []
    for label, *_ in LAYERS:
        own = stat(next(x["ms"] for x in r["layers"]["layers"] if x["layer"] == label) for r in runs)
        sql_ms = stat(next(x["sql_ms"] for x in r["layers"]["layers"] if x["layer"] == label) for r in runs)
        what = runs[0]["layers"]["layers"][[x["layer"] for x in runs[0]["layers"]["layers"]].index(label)]["what"]
        layer_rows.append([label, what, fmt_stat(own), fmt_stat(sql_ms)])
    layer_rows.append(["all", "one claim, end to end in the test client", fmt_stat(
        stat(r["layers"]["total_ms"] for r in runs)), ""])
    result.table(
        f"Where one claim's time goes: in process, one at a time, per layer (own time, median of {PROBE_CLAIMS} "
        "claims per run; `bench/claims_layers.py`)",
        ["layer", "what", "ms", "of which in `cursor.execute` (ms)"],
        layer_rows,
    )
    per_run = [
        [
            f"run {i + 1}",
            f"{r['requests']:,}",
            f"{r['replays']:,}",
            f"{r['s200']:,}",
            f"{r['database']['offers_accepted']:,}",
            f"{r['database']['claim_receipts']:,}",
            "yes" if r["exhausted"] else "no",
        ]
        for i, r in enumerate(runs)
    ]
    result.table(
        "Per run: requests, replays and what the database holds afterwards",
        ["run", "requests", "replays", "HTTP 200", "offers ACCEPTED", "claim receipts", "offers ran out"],
        per_run,
    )
    result.note(
        f"Offers ACCEPTED = distinct claims answered 200 (requests − replays) + {PROBE_CLAIMS} in-process probe "
        "claims + the requests still in flight when wrk stopped at the deadline (up to the concurrency): the "
        "server finished them after wrk stopped listening. Every replay came back 200 (the stored response of "
        "the first claim)."
    )
    result.note(
        f"**What runs.** Each run makes {n:,} OFFERED offers through `vacancy_dispatch` ({OFFER_WORLDS} clinics, "
        f"one dispatcher process each), a STAFF user of both clinics with an API token, then starts the app "
        f"under gunicorn on 127.0.0.1 ({d['gunicorn']['workers']} {d['gunicorn']['worker_class']} "
        f"workers × {d['gunicorn']['threads']} thread(s), `{GUNICORN_CONFIG}`, settings as shipped) and runs "
        f"`wrk -t {WRK_THREADS} -c {conc} "
        f"-d {seconds}s` with `bench/claims.lua`: each request claims a distinct offer "
        f'(`{{"expected_version": 1}}`, `Idempotency-Key: bench-claim-<offer>`) and every {REPLAY_EVERY}th '
        f"request replays a claim sent 64 requests earlier (same key and body: the stored 200 comes back). "
        f"Right after, in the same run, `pgbench -n -c {conc} -j 2 -T {seconds}` runs the built-in TPC-B-like "
        f"script on a scale-{cfg['pgbench_scale']} database of the same server. wrk, gunicorn and PostgreSQL "
        f"share the machine's cores, as pgbench and PostgreSQL do."
    )
    result.note(supply_note(d))
    result.note(reading_note(d))
    result.note(layers_note())
    result.note(web_tier_note())
    result.note(FASTPATH_AB_NOTE)
    return result
