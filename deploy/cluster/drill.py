"""`make failover`: a storm of cancellations, claims and bookings against the two web processes of `make cluster`,
with the PostgreSQL primary's machine killed in the middle (and, unless ``--short``, the Redis master later).

Each lane (a thread, a staff client on one of the two web processes) loops: cancel a CONFIRMED appointment →
wait for the vacancy's offer (the workers dispatch it) → claim the offer → book the hold. Every command carries
its Idempotency-Key; a client that gets a 503, a 5xx or no answer waits (``Retry-After``) and sends the same
command with the same key again, as a well-behaved client does. A probe thread creates a patient every 0.5 s:
the first 201 after the kill is the "first successful write".

The PostgreSQL kill is the loss of the primary's machine: SIGKILL to its keeper (``pg_autoctl``), its postmaster
and its PgBouncer at once (killing only the postmaster lets the surviving keeper restart it in place within
seconds: no failover to measure). The monitor promotes the synchronous standby; the killed node is started
again afterwards and rejoins as the standby. The Redis kill is SIGKILL to the master; the Sentinels promote
the replica and the old master rejoins as a replica when restarted.

Checked just before the PostgreSQL kill, on the primary: commits wait for the standby (``synchronous_commit`` on
or ``remote_apply`` for the service's database, ``synchronous_standby_names`` set, and a streaming standby whose
``sync_state`` is ``sync`` or ``quorum``): without that, "nothing lost" would be luck. Checked at the end, on the
new primary: every 2xx the clients saw is there (cancellations CANCELLED, claims'
holds present, bookings' appointments CONFIRMED, probe patients present), 0 invariant violations
(``observability.invariants.check``), every vacancy of the storm offered within ``OFFER_BOUND_S`` of its
cancellation or of the write service's return, the time from each kill (PostgreSQL's, and Redis's in the full
drill) to the first successful write (goal ≤ 30 s), and the client errors by kind. A JSON report goes to
``<cluster dir>/drill-<time>.json``.
Exit 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster  # noqa: E402

BASE_DIR = cluster.BASE_DIR
WRITE_GOAL_S = 30.0
OFFER_BOUND_S = 60.0
CLIENT_TIMEOUT_S = 20.0


def log(text: str) -> None:
    print(f"drill {time.strftime('%H:%M:%S')} {text}", flush=True)


# --- the world -------------------------------------------------------------------------------------------


def setup_django() -> None:
    env = cluster.service_env()
    os.environ.update({**env, "DATABASE_URL": env["DATABASE_DIRECT_URL"], "DATABASE_CONN_MAX_AGE": "0"})
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()


def build_world(appointments: int) -> dict:
    """A clinic with a waitlist wide enough that every vacancy finds a candidate, and CONFIRMED appointments."""
    from django.utils import timezone

    from bench import db
    from scheduling.models import Patient
    from scheduling.services import appointment_book

    label = f"drill-{int(time.time())}"
    clinic = db.make_clinic(label, practitioners=4)
    first, last = db.bulk_patients(clinic, appointments + 400)
    db.bulk_fresh_decisions(clinic, first, last)
    db.bulk_entries(clinic, 400, patients=(last - 399, last), treatment_id=clinic.bench_treatments[0].pk,
                    practitioner_ids=[p.pk for p in clinic.bench_practitioners], named_share=0.0, wide=True)
    _enable_waitlist(clinic)
    docs, treatment = clinic.bench_practitioners, clinic.bench_treatments[0]
    base = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=3)
    refs = []
    for j, patient in enumerate(Patient.objects.filter(clinic=clinic, pk__lte=first + appointments - 1)
                                .order_by("pk")):
        slot = j // len(docs)
        starts = base + timedelta(days=slot // 16, minutes=30 * (slot % 16))
        refs.append(appointment_book(clinic=clinic, patient=patient, practitioner=docs[j % len(docs)],
                                     treatment=treatment, starts_at=starts, status="CONFIRMED").ref)
    random.Random(43).shuffle(refs)
    _, token = db.staff_user(clinic, f"{label}-staff")
    return {"clinic": clinic.ref, "clinic_id": clinic.pk, "appointments": refs, "token": token}


def _enable_waitlist(clinic) -> None:
    """No quiet hours: the drill runs at any hour (the waitlist itself is on: WAITLIST_ENABLED_BY_DEFAULT)."""
    from scheduling.models import Clinic

    Clinic.objects.filter(pk=clinic.pk).update(settings={**(clinic.settings or {}), "quiet_hours": {}})


# --- the load --------------------------------------------------------------------------------------------


class Storm:
    def __init__(self, world: dict, bases: list[str], lanes: int):
        self.world, self.bases, self.lanes = world, bases, lanes
        self.lock = threading.Lock()
        self.todo = list(world["appointments"])
        self.stop = threading.Event()
        self.committed: dict[str, list[str]] = {"cancel": [], "claim": [], "booking": [], "patient": []}
        self.vacancies: dict[str, float] = {}  # vacancy ref → when its cancellation was answered
        self.answers: Counter = Counter()
        self.writes_ok: list[tuple[float, float]] = []  # each 2xx write's (sent, answered)
        self.gave_up: Counter = Counter()

    def _http(self, base: str):
        import requests

        session = requests.Session()
        session.headers["Authorization"] = f"Token {self.world['token']}"
        return session

    def command(self, http, base: str, path: str, body: dict | None, ok: tuple[int, ...]) -> dict | None:
        """POST with one Idempotency-Key, again after Retry-After while the answer is not final."""
        key = uuid.uuid4().hex
        url = f"{base}/api/v1/clinics/{self.world['clinic']}/{path}"
        deadline = time.time() + 90
        while time.time() < deadline and not self.stop.is_set():
            sent = time.time()
            try:
                response = http.post(url, json=body or {}, headers={"Idempotency-Key": key}, timeout=CLIENT_TIMEOUT_S)
                status = response.status_code
            except Exception as exc:  # noqa: BLE001 - no answer: counted, then the same command again
                status, response = f"error {type(exc).__name__}", None
            with self.lock:
                self.answers[f"{path.split('/')[0]} {status}"] += 1
            if response is not None and status in ok:
                with self.lock:
                    self.writes_ok.append((sent, time.time()))
                return response.json()
            if response is not None and isinstance(status, int) and status < 500 and status != 429:
                return None  # a final refusal (409 …): not retried
            wait = float(response.headers.get("Retry-After", 1)) if response is not None else 1.0
            time.sleep(min(wait, 5.0))
        with self.lock:
            self.gave_up[path.split("/")[0]] += 1
        return None

    def get(self, http, base: str, path: str) -> dict | None:
        try:
            response = http.get(f"{base}/api/v1/clinics/{self.world['clinic']}/{path}", timeout=CLIENT_TIMEOUT_S)
        except Exception:  # noqa: BLE001
            return None
        return response.json() if response.status_code == 200 else None

    def lane(self, index: int) -> None:
        base = self.bases[index % len(self.bases)]
        http = self._http(base)
        while not self.stop.is_set():
            with self.lock:
                if not self.todo:
                    return
                appointment = self.todo.pop()
            answer = self.command(http, base, f"appointments/{appointment}/cancel", {"reason": "drill"}, (200,))
            if answer is None:
                continue
            with self.lock:
                self.committed["cancel"].append(appointment)
                if answer.get("vacancy"):
                    self.vacancies[answer["vacancy"]] = time.time()
            vacancy = answer.get("vacancy")
            offer = None
            waited = time.time() + OFFER_BOUND_S
            while vacancy and time.time() < waited and not self.stop.is_set():
                state = self.get(http, base, f"vacancies/{vacancy}")
                if state and state.get("active_offer"):
                    offer = state["active_offer"]
                    break
                time.sleep(0.5)
            if offer is None:
                continue
            detail = self.get(http, base, f"offers/{offer}")
            if detail is None or detail.get("status") != "OFFERED":
                continue
            claim = self.command(http, base, f"offers/{offer}/claim", {"expected_version": detail["version"]}, (200,))
            if claim is None:
                continue
            with self.lock:
                self.committed["claim"].append(claim["hold"])
            booked = self.command(http, base, f"holds/{claim['hold']}/book", None, (201,))
            if booked is not None:
                with self.lock:
                    self.committed["booking"].append(booked["appointment"])
            time.sleep(0.2)

    def probe(self) -> None:
        base = self.bases[0]
        http = self._http(base)
        while not self.stop.is_set():
            answer = self.command(http, base, "patients/", {"display_name": "Drill probe", "language": "en"}, (201,))
            if answer is not None:
                with self.lock:
                    self.committed["patient"].append(answer["ref"])
            time.sleep(0.5)

    def start(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self.lane, args=(i,), daemon=True) for i in range(self.lanes)]
        threads.append(threading.Thread(target=self.probe, daemon=True))
        for thread in threads:
            thread.start()
        return threads


# --- the kills -------------------------------------------------------------------------------------------


def kill_postgres_machine() -> tuple[str, float]:
    """SIGKILL the primary's keeper, postmaster and PgBouncer; (node name, kill time)."""
    node = cluster.primary_node()
    if node is None:
        raise SystemExit("drill: no primary to kill")
    bouncer = "bouncer_a" if node == "node_a" else "bouncer_b"
    postmaster = int((cluster.CLUSTER_DIR / "pg" / node / "postmaster.pid").read_text().split()[0])
    keeper = cluster.running(node)
    killed_at = time.time()
    for pid in (keeper, postmaster, cluster.running(bouncer), cluster.running(f"follow_{bouncer}")):
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if keeper:
        try:
            os.killpg(keeper, signal.SIGKILL)  # the keeper's own children (its supervisor's services)
        except ProcessLookupError:
            pass
    return node, killed_at


def wait_promoted(old: str, timeout: float = 120) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            new = cluster.primary_node()
        except Exception:  # noqa: BLE001 - monitor busy
            new = None
        if new and new != old:
            return time.time()
        time.sleep(0.25)
    raise SystemExit(f"drill: no promotion within {timeout:g} s")


def restart_postgres_machine(node: str) -> float:
    """The lost machine comes back: keeper and PgBouncer started; seconds until it is the standby again."""
    started = time.time()
    bouncer = "bouncer_a" if node == "node_a" else "bouncer_b"
    for name in (node, bouncer, f"follow_{bouncer}"):
        cluster.pid_file(name).unlink(missing_ok=True)
    cluster.start_node(node)
    cluster.start_bouncer("bouncer_a" if node == "node_a" else "bouncer_b", node)
    cluster.wait_for_pair(timeout=240)
    return time.time() - started


def kill_redis_master() -> tuple[str, float]:
    host, port = cluster.redis_master()
    name = next(n for n in ("redis_a", "redis_b") if cluster.PORTS[n] == port)
    pid = cluster.running(name)
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    return name, killed_at


def wait_redis_promoted(old: str, timeout: float = 60) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        master = cluster.redis_master()
        if master and master[1] != cluster.PORTS[old] and cluster.redis_ping(master[1]):
            return time.time()
        time.sleep(0.25)
    raise SystemExit(f"drill: no Redis promotion within {timeout:g} s")


# --- the checks ------------------------------------------------------------------------------------------


def synchronous_state(node: str) -> dict:
    """What makes a commit wait for the standby, read on ``node`` (the primary) as the service sees it."""
    port = cluster.PORTS[node]
    state = {
        "synchronous_standby_names": cluster.psql(port, "SHOW synchronous_standby_names"),
        # The service's database and user: a per-database or per-role setting would show here.
        "synchronous_commit": cluster.psql(port, "SHOW synchronous_commit", db=cluster.DB_NAME),
        "standbys": cluster.psql(port, "SELECT coalesce(string_agg(application_name || ' ' || state || ' ' || "
                                       "sync_state, ', '), '') FROM pg_stat_replication"),
    }
    streaming = [s for s in state["standbys"].split(", ") if s.endswith((" streaming sync", " streaming quorum"))]
    state["ok"] = bool(state["synchronous_standby_names"] and streaming
                       and state["synchronous_commit"] in ("on", "remote_apply"))
    return state



def verify(storm: Storm, world: dict, outages: list[tuple[float, float]]) -> dict:
    from django.db import connection

    from observability.invariants import check

    connection.close()

    def missing(sql: str, refs: list[str]) -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute(sql, [refs])
            found = {row[0] for row in cursor.fetchall()}
        return sorted(set(refs) - found)

    lost = {
        "cancel": missing("SELECT ref FROM scheduling_appointment WHERE ref = ANY(%s) AND status = 'CANCELLED'",
                          storm.committed["cancel"]),
        "claim": missing("SELECT ref FROM scheduling_capacityhold WHERE ref = ANY(%s)", storm.committed["claim"]),
        "booking": missing("SELECT ref FROM scheduling_appointment WHERE ref = ANY(%s) AND status = 'CONFIRMED'",
                           storm.committed["booking"]),
        "patient": missing("SELECT ref FROM scheduling_patient WHERE ref = ANY(%s)", storm.committed["patient"]),
    }
    report = check([world["clinic_id"]])
    with connection.cursor() as cursor:
        cursor.execute("SELECT status, count(*) FROM common_outboxmessage WHERE clinic_ref = %s GROUP BY status",
                       [world["clinic"]])
        outbox = dict(cursor.fetchall())
    # Each vacancy's first offer, from its creation, or from the end of an outage (kill, service back) that the
    # vacancy waited through (it existed before the outage ended and was first offered after it): the bound the
    # drill holds the loop to. An offer made before or during an outage is timed from its vacancy alone.
    with connection.cursor() as cursor:
        cursor.execute("""SELECT v.ref, v.status, extract(epoch FROM v.created_at),
                                 extract(epoch FROM min(o.created_at))
                          FROM waitlist_vacancy v LEFT JOIN waitlist_offer o ON o.vacancy_id = v.id
                          WHERE v.ref = ANY(%s) GROUP BY v.ref, v.status, v.created_at""", [list(storm.vacancies)])
        rows = cursor.fetchall()
    delays, unoffered = [], []
    for ref, status, created, first_offer in rows:
        offered = float("inf") if first_offer is None else float(first_offer)
        start = max([float(created)] + [back for _killed, back in outages if float(created) <= back <= offered])
        if first_offer is None:
            unoffered.append(f"{ref} {status}")
        else:
            delays.append(float(first_offer) - start)
    late = [d for d in delays if d > OFFER_BOUND_S]
    delays.sort()
    return {
        "committed": {k: len(v) for k, v in storm.committed.items()},
        "lost": {k: v[:20] for k, v in lost.items() if v},
        "lost_count": sum(len(v) for v in lost.values()),
        "invariants": report.failed(), "totals": report.totals, "outbox": outbox,
        "outbox_unsent": sum(n for status, n in outbox.items() if status in ("PENDING", "LEASED")),
        "vacancies": len(rows), "unoffered": unoffered[:20], "unoffered_count": len(unoffered),
        "offer_delay_s": {"p50": round(delays[len(delays) // 2], 2) if delays else None,
                          "max": round(delays[-1], 2) if delays else None, "over_bound": len(late)},
    }


def wait_for_settled(storm: Storm) -> None:
    """Until every vacancy the clients saw has had an offer (reconcile redoes a dispatch lost in a kill) and the
    clinic's outbox has nothing pending (a notice whose task a Redis kill lost is redone by the outbox sweep), at
    most ``OFFER_BOUND_S``."""
    from django.db import connection

    deadline = time.time() + OFFER_BOUND_S
    while time.time() < deadline:
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute("""SELECT (SELECT count(*) FROM waitlist_vacancy v WHERE v.ref = ANY(%s)
                                      AND NOT EXISTS (SELECT 1 FROM waitlist_offer o WHERE o.vacancy_id = v.id))
                                   + (SELECT count(*) FROM common_outboxmessage
                                      WHERE clinic_ref = %s AND status IN ('PENDING', 'LEASED'))""",
                           [list(storm.vacancies), storm.world["clinic"]])
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(2)


def notices_around(clinic_ref: str, killed_at: float, window: float = 20.0) -> dict:
    """Notices written in the ``window`` seconds after a kill: how long they took to be sent, and the first
    send after the kill (the delivery path working again)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("""SELECT count(*), max(extract(epoch FROM sent_at - created_at)),
                                 min(extract(epoch FROM sent_at)) FILTER (WHERE sent_at > to_timestamp(%s))
                          FROM common_outboxmessage WHERE clinic_ref = %s
                          AND created_at BETWEEN to_timestamp(%s) AND to_timestamp(%s)""",
                       [killed_at, clinic_ref, killed_at, killed_at + window])
        count, slowest, first_sent = cursor.fetchone()
    return {"notices": count, "slowest_s": None if slowest is None else round(float(slowest), 2),
            "first_sent_s": None if first_sent is None else round(float(first_sent) - killed_at, 2)}


def first_write_after(storm: Storm, at: float) -> float | None:
    """Seconds from ``at`` to the answer of the first successful write sent after it."""
    with storm.lock:
        after = [answered for sent, answered in storm.writes_ok if sent > at]
    return min(after) - at if after else None


def errors_between(storm: Storm, snapshot: Counter) -> dict:
    with storm.lock:
        now = Counter(storm.answers)
    return {k: v - snapshot.get(k, 0) for k, v in now.items()
            if v - snapshot.get(k, 0) and not any(k.endswith(f" {ok}") for ok in (200, 201))}


def record(result: dict, machine: dict) -> None:
    """The full drill's figures as ``bench/results/failover.json``, and docs/benchmarks.md regenerated with them."""
    from datetime import UTC, datetime

    from bench import harness

    checks, pg = result["checks"], result["postgres"]
    kills = [["PostgreSQL primary's machine (keeper, postmaster, PgBouncer)", pg["promotion_s"], pg["first_write_s"],
              _answers(pg["client_errors"]), _notices(pg["notices"]), pg["rejoin_s"]]]
    if "redis" in result:
        redis = result["redis"]
        kills.append(["Redis master", redis["promotion_s"], redis["first_write_s"], _answers(redis["client_errors"]),
                      _notices(redis["notices"]), "restarted as a replica"])
    committed = checks["committed"]
    rows = [
        ["2xx answers missing on the new primary", f"{checks['lost_count']} of {sum(committed.values())} "
         f"({committed['cancel']} cancellations, {committed['claim']} claims, {committed['booking']} bookings, "
         f"{committed['patient']} probe patients)", "0"],
        ["invariant violations (observability/invariants.py)", str(len(checks["invariants"])), "0"],
        ["vacancies offered", f"{checks['vacancies'] - checks['unoffered_count']} of {checks['vacancies']}; "
         f"first offer p50 {checks['offer_delay_s']['p50']} s, max {checks['offer_delay_s']['max']} s after the "
         "vacancy (or the write service's return)", f"all, within {OFFER_BOUND_S:g} s"],
        ["notices still pending at the end", str(checks["outbox_unsent"]), "0"],
        ["first successful write after the PostgreSQL kill", f"{pg['first_write_s']} s", f"≤ {WRITE_GOAL_S:g} s"],
        ["commits synchronous at the kill (`synchronous_commit`; the standby's `sync_state`)",
         f"{pg['synchronous'].get('synchronous_commit')}; {pg['synchronous'].get('standbys')}", "on; a sync or quorum "
         "standby streaming"],
    ]
    answers = [[key, count] for key, count in result["answers"].items()]
    payload = {
        "name": "failover", "title": "8. Failover drill: the primary's machine and the Redis master killed mid-storm",
        "status": "ok" if not result["failures"] else "failed: " + "; ".join(result["failures"]),
        "scale": "full", "scale_config": {"appointments": committed["cancel"], "lanes": result["lanes"]},
        "machine": machine, "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": result["seconds"],
        "tables": [
            {"title": "The kills (seconds from the SIGKILL)", "columns": [
                "killed", "promoted", "first successful write", "non-2xx answers meanwhile",
                "notices written in the next 20 s: count, slowest, first sent", "back to two nodes"], "rows": kills},
            {"title": "The checks", "columns": ["check", "measured", "required"], "rows": rows},
            {"title": "Every answer the clients saw (command, status)", "columns": ["answer", "count"],
             "rows": answers},
        ],
        "notes": NOTE_PATH.read_text().strip().split("\n\n"), "plots": [], "data": result,
    }
    path = harness.RESULTS_DIR / "failover.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    harness.render_doc()
    log(f"figures in {path} and docs/benchmarks.md")


def _answers(errors: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(errors.items())) or "none"


def _notices(n: dict) -> str:
    return f"{n['notices']}, {n['slowest_s']} s, {n['first_sent_s']} s"


#: The method and reading notes under the figures (docs/benchmarks.md), kept beside the drill.
NOTE_PATH = Path(__file__).with_name("drill_note.md")


def main() -> int:
    parser = argparse.ArgumentParser(description="The failover drill (docs/benchmarks.md 'Failover drill').")
    parser.add_argument("--short", action="store_true", help="one kill (the PostgreSQL primary), for CI")
    parser.add_argument("--lanes", type=int, default=4)
    args = parser.parse_args()
    started = time.time()
    cluster.up()
    setup_django()
    from bench.harness import machine_info

    machine = machine_info()
    appointments = 120 if args.short else 300
    log(f"seeding a clinic with {appointments} CONFIRMED appointments")
    world = build_world(appointments)
    bases = [f"http://{cluster.HOST}:{cluster.PORTS[w]}" for w in ("web_1", "web_2")]
    storm = Storm(world, bases, args.lanes)
    threads = storm.start()
    result: dict = {"short": args.short, "lanes": args.lanes}
    outages: list[tuple[float, float]] = []  # (killed at, service back at)

    log("storm running; the PostgreSQL primary's machine dies in 15 s")
    time.sleep(15)
    before = Counter(storm.answers)
    synchronous = synchronous_state(cluster.primary_node() or "node_a")
    log(f"commits synchronous: {synchronous}")
    node, killed_at = kill_postgres_machine()
    pg_killed_at = killed_at
    log(f"killed {node} (keeper, postmaster, PgBouncer)")
    promoted_at = wait_promoted(node)
    log(f"promoted after {promoted_at - killed_at:.1f} s")
    deadline = time.time() + 90
    while first_write_after(storm, killed_at) is None and time.time() < deadline:
        time.sleep(0.2)
    write_s = first_write_after(storm, killed_at)
    outages.append((killed_at, killed_at + (write_s or 0)))
    log(f"first successful write {write_s if write_s is None else round(write_s, 1)} s after the kill")
    time.sleep(10)
    pg = {"killed": node, "synchronous": synchronous, "promotion_s": round(promoted_at - killed_at, 1),
          "first_write_s": None if write_s is None else round(write_s, 1),
          "client_errors": errors_between(storm, before)}
    pg["rejoin_s"] = round(restart_postgres_machine(node), 1)
    log(f"{node} rejoined as the standby after {pg['rejoin_s']} s")
    result["postgres"] = pg

    if not args.short:
        time.sleep(5)
        before = Counter(storm.answers)
        name, killed_at = kill_redis_master()
        redis_killed_at = killed_at
        log(f"killed the Redis master {name}")
        promoted = wait_redis_promoted(name)
        log(f"Sentinels promoted the replica after {promoted - killed_at:.1f} s")
        time.sleep(15)
        redis = {"killed": name, "promotion_s": round(promoted - killed_at, 1),
                 "first_write_s": round(first_write_after(storm, killed_at) or -1, 2),
                 "client_errors": errors_between(storm, before)}
        cluster.pid_file(name).unlink(missing_ok=True)
        cluster.start_redis()
        outages.append((killed_at, promoted))
        result["redis"] = redis

    log("letting the lanes finish their appointments")
    drain_until = time.time() + (60 if args.short else 120)
    while any(t.is_alive() for t in threads[:-1]) and time.time() < drain_until:
        time.sleep(1)
    storm.stop.set()
    for thread in threads:
        thread.join(timeout=CLIENT_TIMEOUT_S + 10)
    wait_for_settled(storm)
    result["answers"] = dict(sorted(storm.answers.items()))
    result["gave_up"] = dict(storm.gave_up)
    result["checks"] = verify(storm, world, outages)
    result["postgres"]["notices"] = notices_around(world["clinic"], pg_killed_at)
    if "redis" in result:
        result["redis"]["notices"] = notices_around(world["clinic"], redis_killed_at)
    result["seconds"] = round(time.time() - started, 1)
    checks = result["checks"]
    failures = []
    if not pg["synchronous"]["ok"]:
        failures.append(f"commits were not synchronous at the kill: {pg['synchronous']}")
    if checks["lost_count"]:
        failures.append(f"{checks['lost_count']} committed answers missing on the new primary")
    if checks["invariants"]:
        failures.append(f"invariant violations {checks['invariants']}")
    if checks["unoffered_count"] or checks["offer_delay_s"]["over_bound"]:
        failures.append(f"vacancies not offered within {OFFER_BOUND_S:g} s: {checks['unoffered_count']} never, "
                        f"{checks['offer_delay_s']['over_bound']} late")
    if pg["first_write_s"] is None or pg["first_write_s"] > WRITE_GOAL_S:
        failures.append(f"first write after the PostgreSQL kill {pg['first_write_s']} s (goal {WRITE_GOAL_S:g} s)")
    if "redis" in result and not 0 <= result["redis"]["first_write_s"] <= WRITE_GOAL_S:
        failures.append(f"first write after the Redis kill {result['redis']['first_write_s']} s (-1: none; goal "
                        f"{WRITE_GOAL_S:g} s)")
    if checks["outbox_unsent"]:
        failures.append(f"{checks['outbox_unsent']} notices still pending after {OFFER_BOUND_S:g} s")
    if not checks["committed"]["cancel"]:
        failures.append("no cancellation committed: the storm did not run")
    result["failures"] = failures
    if not args.short:
        record(result, machine)
    out = cluster.CLUSTER_DIR / f"drill-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    log(f"report in {out}")
    log("PASS" if not failures else "FAIL: " + "; ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
