"""4. Reevaluation: jobs per second through the fair dispatcher and the worker with a zero-latency CRM
stub (1 and 2 worker processes), beside Procrastinate running the same number of no-op jobs on the
same PostgreSQL; a second column where every job replaces a HELD appointment (real scheduling work);
and fairness with a skewed backlog (one clinic 100k jobs, 99 clinics 10 each)."""

from __future__ import annotations

import asyncio
import math
import multiprocessing as mp
import os
import time
from collections import Counter

from . import db
from .harness import Result, fmt, fmt_stat, jain, log, plot, scale, stat

THROUGHPUT_CLINICS = 10
GLOBAL_LIMIT = 50
PER_CLINIC_LIMIT = 5
BEAT_SECONDS = 5



def procrastinate_db() -> str:
    """Procrastinate's own database, named after the bench database (parallel benches never share it)."""
    return f"{db.db_name(db.bench_url())}_procrastinate"


def _doc_sql(ref_sql: str, constraints: str) -> str:
    """The stub document of revision g, in canonical form (sorted keys, no spaces), built in SQL so the
    job's assessment_hash is the document's SHA-256 exactly as the worker verifies it."""
    return (
        f"""'{{"assessmentRef":"' || {ref_sql} || '","constraints":{constraints},"policyGeneration":1,"""
        """"policyRef":"demo-policy",' || '"profileRevision":' || g || '}'"""
    )


_DOC_SQL = _doc_sql("'asm-' || g", "{}")


class ZeroLatencyCRM:
    """The CRM stub's answer without the network: the contract document for (ref, revision), parsed and
    verified (privacy keys, SHA-256, contract, revision) by the same code the real client uses.

    ``constraints`` per clinic id: a real-work job's ref is ``asm-<clinic id>-<g>`` and its document
    carries the clinic's constraints (so its HELD appointment no longer fits)."""

    def __init__(self, constraints: dict[int, dict] | None = None):
        self.constraints = constraints or {}

    def fetch(self, *, assessment_ref: str, revision: int, expected_hash: str):
        from reevaluation.assessment import canonical, parse_document
        from reevaluation.crm_stub import stub_document

        parts = assessment_ref.split("-")
        constraints = self.constraints.get(int(parts[1])) if len(parts) == 3 else None
        raw = canonical(stub_document(assessment_ref=assessment_ref, revision=revision, constraints=constraints))
        return parse_document(
            raw, expected_hash=expected_hash, expected_revision=revision, assessment_ref=assessment_ref
        )


def enable(clinic, mode: str = "DRY_RUN") -> None:
    from reevaluation.models import ClinicReevaluationSettings

    ClinicReevaluationSettings.objects.create(
        clinic=clinic, tenant_group_id=clinic.tenant_group_id, mutation_mode=mode, drain_state="ACTIVE"
    )


def held_scopes(clinic, n: int) -> dict:
    """``n`` patients with a CRM fingerprint, each with one HELD appointment with the clinic's first
    practitioner (its own half hour, tomorrow onwards, with its capacity allocation), in three
    statements. Returns the constraints that move them to the second practitioner."""
    first, last = db.bulk_patients(clinic, n, fingerprints=True)
    doctor, other = clinic.bench_practitioners[:2]
    treatment = clinic.bench_treatments[0]
    db.sql(
        """INSERT INTO scheduling_appointment (ref, clinic_id, patient_id, practitioner_id, treatment_id,
               starts_at, ends_at, status, version, cancel_reason, cancel_reason_code, cancelled_by, created_at,
               updated_at)
           SELECT 'apt_b' || p.id || 'x' || substr(md5(random()::text), 1, 8), %(c)s, p.id, %(d)s, %(t)s,
               date_trunc('hour', now()) + interval '1 day' + (p.id - %(a)s) * interval '30 minutes',
               date_trunc('hour', now()) + interval '1 day' + (p.id - %(a)s + 1) * interval '30 minutes',
               'HELD', 1, '', '', '', now(), now()
           FROM scheduling_patient p WHERE p.clinic_id = %(c)s AND p.id BETWEEN %(a)s AND %(b)s""",
        {"c": clinic.pk, "d": doctor.pk, "t": treatment.pk, "a": first, "b": last},
    )
    db.sql(
        """INSERT INTO scheduling_capacityallocation (clinic_id, practitioner_id, patient_id, period, active, kind,
               appointment_id, created_at)
           SELECT a.clinic_id, a.practitioner_id, a.patient_id, tstzrange(a.starts_at, a.ends_at, '[)'), true,
               'APPOINTMENT', a.id, now()
           FROM scheduling_appointment a WHERE a.clinic_id = %(c)s AND a.status = 'HELD'""",
        {"c": clinic.pk},
    )
    return {"requiredPractitioner": other.ref}


def bulk_jobs(clinic, n: int, *, age_minutes: int = 0, constraints: dict | None = None) -> None:
    """``n`` PENDING PROPOSED_ONLY jobs of ``clinic`` (one scope each) in one statement, plus their event.

    With ``constraints`` (from ``held_scopes``): HELD_PRESENT jobs, one per patient made there, whose
    assessment requires the other practitioner."""
    event = db.sql(
        """INSERT INTO reevaluation_inboxevent (ref, event_id, tenant_group_id, clinic_id, fingerprint,
               profile_revision, material_change, occurred_at, body_digest, key_id, status, received_at)
           VALUES ('rev_b' || %(c)s || substr(md5(random()::text), 1, 8),
               'bench-' || %(c)s || '-' || md5(random()::text),
               %(tg)s, %(c)s, repeat('0', 64), 1, true, now(), repeat('0', 64), 'demo', 'ACCEPTED', now())
           RETURNING id""",
        {"c": clinic.pk, "tg": clinic.tenant_group_id},
    )[0][0]
    real = constraints is not None
    fp = f"encode(sha256(('{'bench-crm-' if real else 'bench-fp-'}' || %(c)s || '-' || g)::bytea), 'hex')"
    ref = "'asm-' || %(c)s || '-' || g" if real else "'asm-' || g"
    doc = _doc_sql(ref, "' || %(cons)s || '")
    held = (
        "(SELECT jsonb_build_array(a.ref) FROM scheduling_appointment a"
        " JOIN scheduling_patient p ON p.id = a.patient_id"
        f" WHERE a.clinic_id = %(c)s AND p.clinic_id = %(c)s AND p.crm_fingerprint = {fp})"
        if real
        else "'[]'"
    )
    db.sql(
        f"""INSERT INTO reevaluation_reevaluationjob (ref, tenant_group_id, clinic_id, fingerprint, revision, event_id,
               assessment_ref, assessment_hash, material_change, state, priority_class, priority, due_at, attempts,
               max_attempts, cooldown_seconds, last_failure_code, lease_owner, renewal_failures, redrive_reason,
               target_policy_ref, held_targets, proposed_targets, outcome_counts, needs_staff, version, created_at,
               updated_at)
           SELECT 'rjb_b' || %(c)s || 'x' || g || 'x' || substr(md5(random()::text), 1, 6), %(tg)s, %(c)s,
               {fp}, g, %(ev)s, {ref}, encode(sha256(convert_to({doc}, 'UTF8')), 'hex'), true, 'PENDING',
               %(pclass)s, %(prio)s,
               now() - make_interval(mins => %(age)s) + interval '30 minutes' + make_interval(secs => g / 1000.0),
               0, 5, 30, '', '', 0, '', '', {held}, '[]', '{{}}', false, 1,
               now() - make_interval(mins => %(age)s), now()
           FROM generate_series(1, %(n)s) g""",
        {
            "c": clinic.pk, "tg": clinic.tenant_group_id, "ev": event, "n": n, "age": age_minutes,
            "cons": _canonical(constraints or {}), "pclass": "HELD_PRESENT" if real else "PROPOSED_ONLY",
            "prio": 0 if real else 1,
        },
    )


def _canonical(value: dict) -> str:
    from reevaluation.assessment import canonical

    return canonical(value).decode()


def _check_hash_matches() -> None:
    """The SQL-built hash equals the Python canonical document's hash (guards the bench, not the app)."""
    from reevaluation.assessment import document_hash
    from reevaluation.crm_stub import stub_document

    row = db.sql(f"SELECT encode(sha256(convert_to({_DOC_SQL}, 'UTF8')), 'hex') FROM (SELECT 7 AS g) x")[0][0]
    assert row == document_hash(stub_document(assessment_ref="asm-7", revision=7)), "bench hash mismatch"
    constraints = {"requiredPractitioner": "prc_x-Y_z"}
    doc = _doc_sql("'asm-3-' || g", "' || %(cons)s || '")
    row = db.sql(
        f"SELECT encode(sha256(convert_to({doc}, 'UTF8')), 'hex') FROM (SELECT 7 AS g) x",
        {"cons": _canonical(constraints)},
    )[0][0]
    expected = document_hash(stub_document(assessment_ref="asm-3-7", revision=7, constraints=constraints))
    assert row == expected, "bench hash mismatch (real work)"


# --- throughput: ours ----------------------------------------------------------------------------


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of process ``pid`` from /proc, or None where /proc does not show it
    (PostgreSQL on another host or user)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _our_worker(cursor_name: str, constraints: dict, go, out) -> None:
    from django.db import connection, connections

    connections.close_all()
    # Start-up before the start signal: imports, the CRM stub, the connection and its backend.
    from reevaluation.assessment import canonical, parse_document  # noqa: F401
    from reevaluation.crm_stub import stub_document  # noqa: F401
    from reevaluation.rounds.services import work_round

    crm = ZeroLatencyCRM(constraints)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    counts: Counter = Counter()
    go.wait()
    cpu, pg_cpu = _self_cpu(), _proc_cpu(backend)
    while True:
        # The inline worker: the claim takes the lease under this process's tokens and carries the jobs.
        ran = work_round(
            client=crm, global_limit=GLOBAL_LIMIT, per_clinic_limit=PER_CLINIC_LIMIT, cursor_name=cursor_name
        )
        if not ran:
            break
        counts.update(ran)
    pg_end = _proc_cpu(backend)
    out.put(
        (
            {
                "counts": dict(counts),
                "cpu_s": _self_cpu() - cpu,
                "pg_cpu_s": pg_end - pg_cpu if pg_end is not None and pg_cpu is not None else None,
            },
            time.time(),
        )
    )
    connections.close_all()


class _Start:
    """The start signal: a worker's ``wait()`` says it is ready (start-up done), then waits for the rest."""

    def __init__(self, ctx):
        self.ready, self.event = ctx.Semaphore(0), ctx.Event()

    def wait(self) -> None:
        self.ready.release()
        self.event.wait()


def _processes(target, args_for, n: int) -> tuple[float, list]:
    """Start ``n`` forked workers, wait until every one has finished its start-up, then release them
    together. Returns the wall time from the release to the last worker's end and their reports."""
    ctx = mp.get_context("fork")
    go, out = _Start(ctx), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_for(i), go, out)) for i in range(n)]
    for p in procs:
        p.start()
    for _ in procs:
        if not go.ready.acquire(timeout=600):
            raise RuntimeError("a worker did not finish its start-up")
    t0 = time.time()
    go.event.set()
    results = [out.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
    return max(r[1] for r in results) - t0, [r[0] for r in results]


def _cpu_per_job_ms(results: list[dict], done: int, key: str) -> float | None:
    values = [r[key] for r in results]
    if not done or any(v is None for v in values):
        return None
    return sum(values) / done * 1000


def ours(label: str, jobs: int, workers: int, *, real_work: bool = False) -> dict:
    """No-op scopes (DRY_RUN, no appointments), or with ``real_work`` one HELD appointment per scope that
    the assessment moves to another practitioner (APPLY_PROPOSED_AND_HELD: cancel + book, HOLD_REPLACED)."""
    from django.db import connections

    clinics, constraints = [], {}
    for i in range(THROUGHPUT_CLINICS):
        clinic = db.make_clinic(f"{label}-{i}", practitioners=2 if real_work else 1)
        enable(clinic, "APPLY_PROPOSED_AND_HELD" if real_work else "DRY_RUN")
        if real_work:
            constraints[clinic.pk] = held_scopes(clinic, jobs // THROUGHPUT_CLINICS)
        bulk_jobs(clinic, jobs // THROUGHPUT_CLINICS, constraints=constraints.get(clinic.pk))
        clinics.append(clinic)
    # Only this run's clinics are dispatched: any other clinic's PENDING jobs left in the database (the
    # fairness backlog or the console's clinic after ``--keep-db``) would be claimed and run too.
    db.sql(
        "UPDATE reevaluation_clinicreevaluationsettings SET drain_state = 'DRAINED' WHERE NOT clinic_id = ANY(%s)",
        [[c.pk for c in clinics]],
    )
    db.analyze("reevaluation_reevaluationjob", "scheduling_appointment", "scheduling_patient")
    connections.close_all()
    wall, results = _processes(_our_worker, lambda i: (f"bench-{label}", constraints), workers)
    counts: Counter = Counter()
    for r in results:
        counts.update(r["counts"])
    ids = [c.pk for c in clinics]
    # The timed window: from the first claim to the last completion, as the jobs record them.
    (done, window), = db.sql(
        "SELECT count(*), EXTRACT(EPOCH FROM max(finished_at) - min(first_claimed_at))::float"
        " FROM reevaluation_reevaluationjob WHERE clinic_id = ANY(%s) AND state = 'COMPLETED'",
        [ids],
    )
    states = dict(
        db.sql(
            "SELECT state, count(*) FROM reevaluation_reevaluationjob WHERE clinic_id = ANY(%s) GROUP BY state", [ids]
        )
    )
    outcomes = dict(
        db.sql(
            "SELECT outcome, count(*) FROM reevaluation_reevaluationoutcome WHERE clinic_id = ANY(%s) AND applied"
            " GROUP BY outcome",
            [ids],
        )
    )
    if real_work:
        assert outcomes.get("HOLD_REPLACED", 0) == states.get("COMPLETED", 0), (outcomes, states)
    return {
        "jobs": jobs,
        "window_s": window,
        "jobs_per_s": done / window,
        "wall_s": wall,
        "cpu_ms_per_job": {
            "worker": _cpu_per_job_ms(results, done, "cpu_s"),
            "postgres": _cpu_per_job_ms(results, done, "pg_cpu_s"),
        },
        # Cores our processes and their backends kept busy over the window: about 1 per process when
        # nothing else competes for the CPU (and nothing waits on a lock); less on a loaded machine.
        "cores_busy": (
            sum(r["cpu_s"] + r["pg_cpu_s"] for r in results) / window
            if all(r["pg_cpu_s"] is not None for r in results)
            else None
        ),
        "results": dict(counts),
        "states": states,
        "applied_outcomes": outcomes,
    }


# --- throughput: Procrastinate -------------------------------------------------------------------


def _procrastinate_app():
    from procrastinate import App, PsycopgConnector

    app = App(connector=PsycopgConnector(conninfo=db.url_with_db(db.bench_url(), procrastinate_db())))

    @app.task(queue="bench", name="bench_noop")
    def bench_noop():
        return None

    return app, bench_noop


def procrastinate_prepare(jobs: int) -> None:
    import psycopg

    with psycopg.connect(db.admin_dsn(db.bench_url()), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{procrastinate_db()}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{procrastinate_db()}"')
    app, task = _procrastinate_app()

    async def go():
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            for start in range(0, jobs, 1000):
                await task.batch_defer_async(*([{}] * min(1000, jobs - start)))

    asyncio.run(go())


def _procrastinate_worker(go, out) -> None:
    app, _task = _procrastinate_app()

    async def work():
        async with app.open_async():  # start-up (pool, connection) before the start signal
            await app.check_connection_async()
            go.wait()
            await app.run_worker_async(
                queues=["bench"],
                wait=False,
                concurrency=1,
                install_signal_handlers=False,
                listen_notify=False,
                delete_jobs="never",
            )

    asyncio.run(work())
    out.put(({}, time.time()))


def procrastinate_run(jobs: int, workers: int) -> dict:
    import psycopg

    procrastinate_prepare(jobs)
    wall, _ = _processes(_procrastinate_worker, lambda i: (), workers)
    with psycopg.connect(db.url_with_db(db.bench_url(), procrastinate_db())) as conn:
        done = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'").fetchone()[0]
        # The same window as ours: from the first job started to the last one succeeded.
        window = conn.execute(
            "SELECT EXTRACT(EPOCH FROM (SELECT max(at) FROM procrastinate_events WHERE type = 'succeeded')"
            " - (SELECT min(at) FROM procrastinate_events WHERE type = 'started'))::float"
        ).fetchone()[0]
    return {"jobs": jobs, "window_s": window, "jobs_per_s": done / window, "wall_s": wall, "succeeded": done}


# --- fairness ------------------------------------------------------------------------------------


def water_fill(demands: dict[int, float], capacity: float) -> dict[int, float]:
    """Max-min fair entitlements: equal shares, capped at each clinic's demand."""
    left, rest, out = capacity, dict(demands), {}
    while rest:
        share = left / len(rest)
        capped = {k: d for k, d in rest.items() if d <= share}
        if not capped:
            out.update({k: share for k in rest})
            break
        for k, d in capped.items():
            out[k] = d
            left -= d
            del rest[k]
    return out


def window_jain(demands: dict[int, int], claimed: dict[int, int], capacity: int) -> float:
    active = {k: d for k, d in demands.items() if d > 0}
    ent = water_fill(active, capacity)
    return jain([claimed.get(k, 0) / ent[k] for k in active if ent[k] > 0])


def fairness_build(big: int, small_clinics: int, small_jobs: int):
    big_clinic = db.make_clinic("fair-big", practitioners=1)
    enable(big_clinic)
    bulk_jobs(big_clinic, big, age_minutes=60)  # the big backlog arrived first (earlier due times)
    smalls = []
    for i in range(small_clinics):
        clinic = db.make_clinic(f"fair-{i}", practitioners=1)
        enable(clinic)
        bulk_jobs(clinic, small_jobs)
        smalls.append(clinic)
    db.analyze("reevaluation_reevaluationjob")
    return big_clinic, smalls


def fairness_reset(ids: list[int]) -> None:
    db.sql(
        """UPDATE reevaluation_reevaluationjob SET state = 'PENDING', attempts = 0, lease_owner = '',
           lease_expires_at = NULL, first_claimed_at = NULL, version = 1 WHERE clinic_id = ANY(%s)""",
        [ids],
    )


def _pending(ids: list[int]) -> dict[int, int]:
    rows = db.sql(
        "SELECT clinic_id, count(*) FROM reevaluation_reevaluationjob WHERE clinic_id = ANY(%s) AND state = 'PENDING'"
        " GROUP BY clinic_id",
        [ids],
    )
    return {k: 0 for k in ids} | dict(rows)


def fairness_fair(big_clinic, smalls, cursor_name: str, max_rounds: int = 200) -> dict:
    from reevaluation.services import dispatch_round

    ids = [big_clinic.pk] + [c.pk for c in smalls]
    small_ids = set(ids[1:])
    small_total = sum(_pending(ids)[k] for k in small_ids)
    rounds, small_claimed, round_ms = [], 0, []
    last_small_round = None
    start = time.perf_counter()
    first_demand = None
    while len(rounds) < max_rounds:
        demand = _pending(ids)
        first_demand = first_demand or demand
        t = time.perf_counter()
        claims = dispatch_round(global_limit=GLOBAL_LIMIT, per_clinic_limit=PER_CLINIC_LIMIT, cursor_name=cursor_name)
        round_ms.append((time.perf_counter() - t) * 1000)
        got = Counter(c.clinic_id for c in claims)
        rounds.append({"demand": demand, "claimed": dict(got)})
        small_claimed += sum(v for k, v in got.items() if k in small_ids)
        if small_claimed >= small_total and last_small_round is None:
            last_small_round = len(rounds)
            last_small_wall = time.perf_counter() - start
            break
    return {
        "rounds": rounds,
        "round_ms": round_ms,
        "last_small_round": last_small_round,
        "last_small_wall_s": last_small_wall if last_small_round else math.nan,
        "first_demand": first_demand,
        "small_cumulative": _cumulative_small(rounds, small_ids),
    }


def _cumulative_small(rounds, small_ids) -> list[int]:
    out, total = [], 0
    for r in rounds:
        total += sum(v for k, v in r["claimed"].items() if k in small_ids)
        out.append(total)
    return out


def fifo_simulation(big_clinic, smalls, rounds: int) -> dict:
    """A FIFO dispatcher (global order priority, due_at, id; 50 per round; no per-clinic limit) on the same
    queue, computed from the global order of the PENDING jobs."""
    ids = [big_clinic.pk] + [c.pk for c in smalls]
    order = db.sql(
        "SELECT clinic_id FROM reevaluation_reevaluationjob WHERE clinic_id = ANY(%s) AND state = 'PENDING'"
        " ORDER BY priority, due_at, id",
        [ids],
    )
    clinic_at = [r[0] for r in order]
    small_ids = set(ids[1:])
    last_small_rank = max(i for i, c in enumerate(clinic_at) if c in small_ids)
    sim = []
    for r in range(rounds):
        sim.append({"claimed": dict(Counter(clinic_at[r * GLOBAL_LIMIT : (r + 1) * GLOBAL_LIMIT]))})
    return {
        "rounds": sim,
        "last_small_round": last_small_rank // GLOBAL_LIMIT + 1,
        "small_cumulative": _cumulative_small(sim, small_ids),
    }


def jain_figures(first_demand: dict[int, int], rounds: list[dict], cycle: int) -> dict:
    per_round = []
    for r in rounds:
        demand = r.get("demand") or first_demand
        per_round.append(window_jain(demand, r["claimed"], GLOBAL_LIMIT))
    window = rounds[:cycle]
    claimed: Counter = Counter()
    for r in window:
        claimed.update(r["claimed"])
    return {
        "per_round_mean": sum(per_round) / len(per_round),
        "first_cycle": window_jain(first_demand, claimed, GLOBAL_LIMIT * len(window)),
    }


# --- the benchmark -------------------------------------------------------------------------------


def run() -> Result:
    cfg = scale()
    result = Result("reevaluation", "4. Reevaluation: throughput beside Procrastinate, and fairness")
    _check_hash_matches()
    jobs, rjobs, pjobs = cfg["reeval_jobs"], cfg["reeval_real_jobs"], cfg["procrastinate_jobs"]
    thr = {1: [], 2: []}
    real = {1: [], 2: []}
    peer = {1: [], 2: []}
    for run_no in range(cfg["runs"]):
        for workers in (1, 2):
            log(f"reevaluation: run {run_no + 1}: ours, {workers} worker process(es), {jobs:,} jobs")
            ours_r = ours(f"r{run_no}w{workers}", jobs, workers)
            log(
                f"reevaluation: run {run_no + 1}: ours with a HELD appointment replaced per job, {workers} "
                f"process(es), {rjobs:,} jobs"
            )
            real_r = ours(f"r{run_no}w{workers}h", rjobs, workers, real_work=True)
            log(f"reevaluation: run {run_no + 1}: procrastinate, {workers} worker process(es), {pjobs:,} jobs")
            peer_r = procrastinate_run(pjobs, workers)
            thr[workers].append(ours_r)
            real[workers].append(real_r)
            peer[workers].append(peer_r)
            log(
                f"reevaluation: ours {ours_r['jobs_per_s']:.0f} jobs/s over {ours_r['window_s']:.1f} s "
                f"{ours_r['states']} (CPU ms/job {ours_r['cpu_ms_per_job']}), real work "
                f"{real_r['jobs_per_s']:.1f} jobs/s over {real_r['window_s']:.1f} s {real_r['applied_outcomes']}, "
                f"procrastinate {peer_r['jobs_per_s']:.0f} jobs/s over {peer_r['window_s']:.1f} s"
            )
    data = {"throughput": {}}
    rows = []
    for w in (1, 2):
        o = stat(r["jobs_per_s"] for r in thr[w])
        h = stat(r["jobs_per_s"] for r in real[w])
        p = stat(r["jobs_per_s"] for r in peer[w])
        ratio = stat(a["jobs_per_s"] / b["jobs_per_s"] for a, b in zip(thr[w], peer[w], strict=True))
        data["throughput"][w] = {
            "ours": o,
            "ours_real_work": h,
            "procrastinate": p,
            "ratio": ratio,
            "ours_runs": thr[w],
            "real_work_runs": real[w],
            "peer_runs": peer[w],
        }
        data["throughput"][w]["window_s"] = {
            "ours": stat(r["window_s"] for r in thr[w]),
            "ours_real_work": stat(r["window_s"] for r in real[w]),
            "procrastinate": stat(r["window_s"] for r in peer[w]),
        }
        cpu = {
            kind: [r["cpu_ms_per_job"][kind] for r in thr[w] if r["cpu_ms_per_job"][kind] is not None]
            for kind in ("worker", "postgres")
        }
        data["throughput"][w]["cpu_ms_per_job"] = {k: stat(v) if v else None for k, v in cpu.items()}
        busy = [r["cores_busy"] for r in thr[w] if r["cores_busy"] is not None]
        data["throughput"][w]["cores_busy"] = stat(busy) if busy else None
        rows.append([str(w), fmt_stat(o), fmt_stat(h), fmt_stat(p), fmt_stat(ratio)])
    scaling = stat(a["jobs_per_s"] / b["jobs_per_s"] for a, b in zip(thr[2], thr[1], strict=True))
    data["throughput"]["ours_2_over_1"] = scaling
    data["throughput"]["real_work_2_over_1"] = stat(
        a["jobs_per_s"] / b["jobs_per_s"] for a, b in zip(real[2], real[1], strict=True)
    )
    result.table(
        f"Jobs per second ({jobs:,} jobs over {THROUGHPUT_CLINICS} clinics, {rjobs:,} with real work; "
        f"Procrastinate: {pjobs:,} no-op jobs), timed from the first claim to the last completion",
        [
            "worker processes",
            "ours: dispatch + worker, zero-latency CRM, nothing to change",
            "ours: every job replaces a HELD appointment",
            "Procrastinate no-op",
            "ours (nothing to change) ÷ Procrastinate",
        ],
        rows,
    )

    log("reevaluation: fairness: building the skewed backlog")
    big_clinic, smalls = fairness_build(cfg["fairness_big"], cfg["fairness_small_clinics"], cfg["fairness_small_jobs"])
    ids = [big_clinic.pk] + [c.pk for c in smalls]
    n_clinics = len(ids)
    k = GLOBAL_LIMIT // PER_CLINIC_LIMIT
    cycle = math.ceil(n_clinics / k)
    fifo = fifo_simulation(big_clinic, smalls, 40)
    fair_runs = []
    for run_no in range(cfg["runs"]):
        log(f"reevaluation: fairness run {run_no + 1}")
        fair_runs.append(fairness_fair(big_clinic, smalls, f"bench-fair-{run_no}"))
        fairness_reset(ids)
    first = fair_runs[0]
    jf = [jain_figures(r["first_demand"], r["rounds"], cycle) for r in fair_runs]
    jfifo = jain_figures(first["first_demand"], [dict(x, demand=None) for x in fifo["rounds"]], cycle)
    worst_fair = [r["last_small_round"] for r in fair_runs]
    round_ms = [sum(r["round_ms"]) / len(r["round_ms"]) for r in fair_runs]
    data["fairness"] = {
        "clinics": n_clinics,
        "big_jobs": cfg["fairness_big"],
        "small_jobs_each": cfg["fairness_small_jobs"],
        "global_limit": GLOBAL_LIMIT,
        "per_clinic_limit": PER_CLINIC_LIMIT,
        "cycle_rounds": cycle,
        "fair": {
            "jain_per_round_mean": stat(j["per_round_mean"] for j in jf),
            "jain_first_cycle": stat(j["first_cycle"] for j in jf),
            "worst_small_wait_rounds": stat(worst_fair),
            "worst_small_wait_s_at_beat": stat(x * BEAT_SECONDS for x in worst_fair),
            "worst_small_wait_s_back_to_back": stat(r["last_small_wall_s"] for r in fair_runs),
            "round_ms_mean": stat(round_ms),
            "small_cumulative": first["small_cumulative"],
        },
        "fifo": {
            "jain_per_round_mean": jfifo["per_round_mean"],
            "jain_first_cycle": jfifo["first_cycle"],
            "worst_small_wait_rounds": fifo["last_small_round"],
            "worst_small_wait_s_at_beat": fifo["last_small_round"] * BEAT_SECONDS,
            "small_cumulative": fifo["small_cumulative"],
        },
    }
    f, q = data["fairness"]["fair"], data["fairness"]["fifo"]
    result.table(
        f"Fairness: one clinic with {cfg['fairness_big']:,} PENDING jobs (the oldest), {n_clinics - 1} clinics with "
        f"{cfg['fairness_small_jobs']} each; rounds of global {GLOBAL_LIMIT} / per clinic {PER_CLINIC_LIMIT}",
        ["figure", "ours (fair dispatch_round)", "FIFO baseline (same queue)", "ours ÷ FIFO"],
        [
            [
                "Jain's index per round (mean over rounds)",
                fmt_stat(f["jain_per_round_mean"]),
                fmt(q["jain_per_round_mean"]),
                fmt(f["jain_per_round_mean"]["median"] / q["jain_per_round_mean"]),
            ],
            [
                f"Jain's index over the first cycle ({cycle} rounds)",
                fmt_stat(f["jain_first_cycle"]),
                fmt(q["jain_first_cycle"]),
                fmt(f["jain_first_cycle"]["median"] / q["jain_first_cycle"]),
            ],
            [
                "worst wait of a small clinic's job (rounds)",
                fmt_stat(f["worst_small_wait_rounds"]),
                fmt(q["worst_small_wait_rounds"]),
                fmt(f["worst_small_wait_rounds"]["median"] / q["worst_small_wait_rounds"]),
            ],
            [
                f"… in seconds at one round per beat ({BEAT_SECONDS} s)",
                fmt_stat(f["worst_small_wait_s_at_beat"]),
                fmt(q["worst_small_wait_s_at_beat"]),
                "",
            ],
            [
                "… in seconds with rounds back to back (dispatch only)",
                fmt_stat(f["worst_small_wait_s_back_to_back"]),
                "",
                "",
            ],
            ["mean time of one dispatch_round (ms)", fmt_stat(f["round_ms_mean"]), "", ""],
        ],
    )
    result.plots.append(_plot(data["fairness"], cycle))
    result.data = data
    t1 = data["throughput"][1]
    result.note(
        f"**Throughput: what runs.** Each run makes {THROUGHPUT_CLINICS} clinics with {jobs:,} PENDING jobs between "
        f"them ({rjobs:,} for the real-work column; one scope each, built in one `INSERT … SELECT`; "
        f"`assessment_hash` is the SHA-256 of the stub's canonical document). 1 or 2 forked worker processes "
        f"each loop `work_round(global_limit={GLOBAL_LIMIT}, "
        f"per_clinic_limit={PER_CLINIC_LIMIT})`: one fair `dispatch_round` whose claim takes the lease under the "
        f"worker's own tokens and returns each job with its scope head (`UPDATE … RETURNING`, `SKIP LOCKED`), then "
        f"every claim run inline against a zero-latency CRM: the stub's document handed to the real "
        f"`parse_document` (privacy keys, hash, contract, revision) without HTTP. First column: clinics in "
        f"`DRY_RUN` whose patients have no PROPOSED/HELD appointment (the queue machinery: read the scopes, fenced "
        f"completion, policy advance, needs-staff settle, outbox rows; five statements for a round's quiet jobs "
        f"together, and five for one job alone, asserted in `tests/reevaluation/test_worker_statements.py`). "
        f"Second column: clinics in `APPLY_PROPOSED_AND_HELD` "
        f"where every job's patient has one HELD appointment that the assessment moves to the other practitioner "
        f"(head and job locked, CONFIRMED digest before and after, cancel + book under the exclusion constraint, "
        f"outcome row: HOLD_REPLACED, checked to equal the completed count). "
        f"Procrastinate {__import__('procrastinate').__version__} runs {pjobs:,} no-op tasks "
        f"(`wait=False`, concurrency 1 per process, no LISTEN/NOTIFY, jobs kept) in its own database on the same "
        f"server: the peer for raw claim-and-complete throughput."
    )
    w1, w2 = data["throughput"][1]["window_s"], data["throughput"][2]["window_s"]
    result.note(
        f"**Throughput: how it is timed.** The job counts are sized so that every run lasts several seconds at "
        f"both process counts (timed windows, medians at 1 / 2 processes: ours {w1['ours']['median']:.1f} / "
        f"{w2['ours']['median']:.1f} s, real work {w1['ours_real_work']['median']:.1f} / "
        f"{w2['ours_real_work']['median']:.1f} s, Procrastinate {w1['procrastinate']['median']:.1f} / "
        f"{w2['procrastinate']['median']:.1f} s; `BENCH_SCALE=full` triples the counts). Start-up is outside "
        f"the timing: every process forks, imports, opens its database connection (Procrastinate: opens its "
        f"app and checks the connection) and then waits for one start signal; jobs per second is the completed "
        f"count divided by the window the jobs themselves record, from the first claim to the last completion "
        f"(ours: `min(first_claimed_at)` to `max(finished_at)`; Procrastinate: its first `started` event to "
        f"its last `succeeded` event). CPU per job is read from each worker process and from its PostgreSQL "
        f"backend (`/proc`, same host) over the same run."
    )
    cpu1, cpu2 = data["throughput"][1]["cpu_ms_per_job"], data["throughput"][2]["cpu_ms_per_job"]
    busy1, busy2 = data["throughput"][1]["cores_busy"], data["throughput"][2]["cores_busy"]
    cpu_text = ""
    if cpu1["worker"] and cpu1["postgres"] and cpu2["worker"] and cpu2["postgres"] and busy1 and busy2:
        per_job = cpu1["worker"]["median"] + cpu1["postgres"]["median"]
        per_job2 = cpu2["worker"]["median"] + cpu2["postgres"]["median"]
        cpu_text = (
            f" One quiet job costs {cpu1['worker']['median']:.2f} ms of worker CPU and "
            f"{cpu1['postgres']['median']:.2f} ms in its PostgreSQL backend at one process, {per_job2:.2f} ms "
            f"together at two (contention in the claim, lock waits or retries, would raise it). One process "
            f"runs its Python and its backend in turn, so it can use one core: at most about "
            f"{1000 / per_job:,.0f} jobs/s; two can use both cores: at most about {2000 / per_job2:,.0f}, "
            f"×{2 * per_job / per_job2:.2f}, which is what a quiet machine should show. The processes and their "
            f"backends kept {busy1['median']:.2f} cores busy at one process and {busy2['median']:.2f} at two: "
            f"well under 1 and 2 means the machine's other load, not the queue, set the pace."
        )
    result.note(
        f"**Throughput: reading it.** With nothing to change, ours ÷ Procrastinate is "
        f"{t1['ratio']['median']:.2f} at one process; 2 processes give ×"
        f"{data['throughput']['ours_2_over_1']['median']:.2f} (×"
        f"{data['throughput']['real_work_2_over_1']['median']:.2f} with real work) on 2 cores shared with "
        f"PostgreSQL.{cpu_text} A round is about ten statements for up to {GLOBAL_LIMIT} jobs with nothing to "
        f"change (the claim is one `UPDATE … RETURNING`, the write-back five for the batch), so the CRM document "
        f"check and Python dominate; a replaced HELD appointment costs about twenty-five statements of its own "
        f"(locks, CONFIRMED digests, cancel and book under the exclusion constraint, outcome row)."
    )
    result.note(
        f"**Fairness: how it is measured.** The big clinic has the lowest id and the oldest due times, so a FIFO "
        f"dispatcher (global order `priority, due_at, id`, {GLOBAL_LIMIT} per round) serves only it for "
        f"{q['worst_small_wait_rounds'] - 1:,} rounds; the FIFO column is computed exactly from the global order "
        f"of the same PENDING jobs. Ours runs `dispatch_round` back to back (no workers: claimed jobs stay "
        f"RUNNING) until every small clinic's job is claimed, three times (reset between runs). Shares are "
        f"demand-normalised: in a window of rounds each clinic with PENDING work is entitled to its max-min "
        f"fair share of the window's capacity (water-filling over its PENDING count), and x = claimed ÷ "
        f"entitlement; Jain's index is (Σx)² ÷ (n·Σx²): 1 is perfectly fair, 1/n is one clinic taking "
        f"everything. One round can serve only K = {k} clinics ({GLOBAL_LIMIT} ÷ {PER_CLINIC_LIMIT}), so per "
        f"round the best possible index with {n_clinics} waiting clinics is about K/n = {k / n_clinics:.2f}: "
        f"fairness is a property of a cycle of ⌈n/K⌉ = {cycle} rounds, where ours should reach 1."
    )
    result.note(
        f"**Fairness: reading it.** A small clinic's last job waits {f['worst_small_wait_rounds']['median']:.0f} "
        f"rounds with ours (the bound in `docs/reevaluation.md` is ⌈n/K⌉ = {cycle} rounds per service, and "
        f"{cfg['fairness_small_jobs']} jobs need ⌈{cfg['fairness_small_jobs']}/{PER_CLINIC_LIMIT}⌉ services), "
        f"against {q['worst_small_wait_rounds']:,} rounds FIFO (≈ {q['worst_small_wait_s_at_beat'] / 3600:.1f} h "
        f"at one round per {BEAT_SECONDS} s beat). Meanwhile the big clinic still gets "
        f"{PER_CLINIC_LIMIT} jobs in every round that serves it."
    )
    result.note(REAL_WORK_LAYERS_NOTE)
    return result


#: Issue 27 part 3, measured with ``python -m bench.reevaluation_profile`` (not re-run by ``make bench``).
REAL_WORK_LAYERS_NOTE = (
    '**Real work, per layer, before and after (issue 27 part 3; measured, not re-run by `make bench`).** '
    '`python -m bench.reevaluation_profile 300` runs 295 real-work jobs (a HELD appointment replaced each, one '
    'clinic, rounds of 50) with the inline worker under cProfile and counts and times every statement '
    '(`--plain`: the same without cProfile). Both runs on 2026-12-03 on this 2-core machine, load average '
    'about 1. **Before** (each job written back alone, `worker.job_complete`): 31.1 statements a job, twelve '
    'of them `SAVEPOINT`/`RELEASE` pairs of nested scheduling commands; 35.1 ms a job without cProfile (28 '
    'jobs/s in this harness, 76 in the bench\'s shape), 55.5 ms under it, of which 18.3 ms inside '
    '`cursor.execute`. By layer, per job under cProfile: the decision and its apply (`_decide_all`) 20.2 ms, '
    'most of it replacing the HOLD (`_replace` 15.1: `appointment_cancel` 10.0, `appointment_book` 4.5); the '
    'CONFIRMED digest, three reads (7.2); outcome rows and the job\'s state (5.0); the completion notice '
    '(1.5); the policy advance (0.7); the CRM fetch and parse under 0.1. The time was Django building '
    'statements (a 6-table `select_related` costs about 2 ms of Python and 1 ms of PostgreSQL planning on '
    'this machine) and round trips, not PostgreSQL executing them. **After** (`rounds._complete_held_batch`: '
    'a round\'s jobs whose scopes hold only HELD appointments that the assessment keeps or moves to its first '
    'fitting combination, in a clinic applying HELD outcomes, share one transaction): about 20 statements for '
    'the whole round, 0.5 a job; 2.3 ms a job without cProfile (433 jobs/s in this harness), 4.2 ms under it, '
    '1.9 ms inside `cursor.execute`. By layer, per job under cProfile: the fair claim (`dispatch_round`) 0.52 '
    'ms; the batch 3.57 ms: the scopes\' appointments in one read 0.42, the CONFIRMED digest before and after '
    '0.25, practitioners and treatments once 0.13, heads and jobs locked 0.09, the policy advance 0.03, '
    'every cancel and rebook in one scheduling command (`appointments_replace_held`: allocations locked, one '
    'UPDATE for the cancels and their releases, one INSERT of the new rows, one of their allocations under '
    'the exclusion constraints) 1.21, live proposals superseded 0.12, the jobs completed in one UPDATE 0.15, '
    'the rest the outcome and outbox rows in one INSERT each. What it does not cover (a PROPOSED appointment, '
    'a gone target, a future CONFIRMED one that no longer fits, no fitting combination, a taken slot, a row '
    'changed since it was read, a newer head, another mode) undoes the batch or leaves the job out, and the '
    'one-by-one path decides as before: the outcomes are the same (`tests/reevaluation/test_held_batch.py`, '
    'with a race against staff confirming one of the holds). What limits the rest: model instances and '
    'PostgreSQL\'s share of the round trips, about half each.'
)


def _plot(fair: dict, cycle: int) -> str:
    def draw(fig, ax):
        a = fair["fair"]["small_cumulative"]
        b = fair["fifo"]["small_cumulative"][: max(len(a) + 5, 30)]
        ax.plot(range(1, len(a) + 1), a, "o-", label="ours: fair dispatch_round")
        ax.plot(range(1, len(b) + 1), b, "s-", label=f"FIFO: 0 until round {fair['fifo']['worst_small_wait_rounds']:,}")
        ax.axvline(cycle, color="grey", linestyle=":", label=f"one cycle ({cycle} rounds)")
        ax.set_xlabel("dispatch round")
        ax.set_ylabel("small clinics' jobs claimed (cumulative)")
        ax.set_title("Skewed backlog: 1 clinic × 100k jobs, 99 clinics × 10")
        ax.grid(True, alpha=0.3)
        ax.legend()

    return plot("reevaluation_fairness.png", draw)
