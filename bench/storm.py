"""6. The storm: cancellations through the API while the whole loop runs in the shape ``make run`` deploys.

gunicorn, one Celery worker and beat (``bench/deployment.py``) serve 50 clinics with bench-shaped waitlists
(one big clinic, 49 small ones); the webhook provider delivers every offer notice to a receiver on
loopback (``bench/receiver.py``) that records its arrival. A paced load sends cancellations of CONFIRMED
appointments (the big clinic takes a third), patients claim about 10 % of the notices they receive
through their claim link, and staff load the console's waitlist page. Measured: cancellation answer →
first offer notice at the receiver, notices per second, claims and console latency, per-clinic fairness;
then pgbench on the same server and the invariant checker.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

from . import db
from .deployment import HOST, deployment, free_port
from .harness import Result, fmt, fmt_stat, log, percentile, scale, stat

CLINICS = 50
BIG_SHARE = 1 / 3
CLAIM_SHARE = 0.10
SENDERS = 24  # cancellation threads (open loop: each request leaves at its scheduled time, or as soon as free)
CLAIMERS = 4
CONSOLE_USERS = 2
CONSOLE_PAUSE_S = 0.5  # each staff member reloads the page every half second
PGBENCH_CLIENTS = 16
WARMUP_SHARE = 5  # the warm-up storm: a fifth of a run's cancellations, at the same rate
#: The tables the storm grows from empty: vacuumed and analysed after the warm-up, as autovacuum keeps a live system's.
WARMED_TABLES = ("waitlist_vacancy", "waitlist_offer", "waitlist_offerevent", "waitlist_waitlistentry",
                 "common_outboxmessage", "common_outboxattempt", "common_commandreceipt", "scheduling_appointment",
                 "scheduling_capacityhold", "scheduling_capacityallocation")
DRAIN_IDLE_S = 20  # after the last cancellation: give up when nothing moved for this long
DRAIN_MAX_S = 300
SECRET = "bench-storm-webhook-secret"
OFFER_TOPIC = "waitlist.offer_made"


# --- the world ---------------------------------------------------------------------------------


def _add_sms(clinic, first: int, last: int) -> None:
    """The webhook provider sends SMS: a phone and GRANTED SMS consent for every bench patient."""
    db.sql("UPDATE scheduling_patient SET phone = '+8210' || lpad(id::text, 8, '0') WHERE clinic_id = %s "
           "AND id BETWEEN %s AND %s", [clinic.pk, first, last])
    db.sql(
        """
        INSERT INTO scheduling_contactconsent
            (ref, clinic_id, patient_id, channel, state, source, actor, recorded_at, evidence)
        SELECT 'cns_s' || p.id || 'x' || substr(md5(random()::text), 1, 8), %(c)s, p.id, 'SMS', 'GRANTED', 'IMPORT',
               'system:bench', now(), ''
        FROM scheduling_patient p WHERE p.clinic_id = %(c)s AND p.id BETWEEN %(a)s AND %(b)s
        """,
        {"c": clinic.pk, "a": first, "b": last},
    )


def build_world(receiver_url: str, sizes: list[int]) -> dict:
    """50 clinics (the big one with 10× the entries and practitioners), webhook notices to ``receiver_url``,
    and per run its own CONFIRMED appointments to cancel, spread as the storm will cancel them."""
    from scheduling.models import Clinic, Patient, Role
    from scheduling.services import appointment_book, clinic_grant_role

    cfg = scale()
    big_entries, small_entries = cfg["storm_big_entries"], cfg["storm_small_entries"]
    rng = random.Random(27)
    clinics = []
    for i in range(CLINICS):
        big = i == 0
        clinic = db.make_clinic(f"storm-{'big' if big else i}", practitioners=20 if big else 5)
        clinic.settings = {"quiet_hours": {}, "notification": {"provider": "webhook", "webhook_url": receiver_url},
                           "egress_allowlist": ["127.0.0.1/32"]}  # the loopback receiver (common/egress.py)
        Clinic.objects.filter(pk=clinic.pk).update(settings=clinic.settings)
        n = big_entries if big else small_entries
        first, last = db.bulk_patients(clinic, n)
        _add_sms(clinic, first, last)
        db.bulk_fresh_decisions(clinic, first, last)
        db.bulk_entries(clinic, n, patients=(first, last), treatment_id=clinic.bench_treatments[0].pk,
                        practitioner_ids=[p.pk for p in clinic.bench_practitioners], named_share=0.3,
                        window_days=7, horizon_days=40, seed=0.1 + i / 100)
        clinic.bench_patient_range = (first, last)
        clinics.append(clinic)
    # Who cancels what: a third of each run's cancellations in the big clinic, the rest uniform over the others.
    plan: list[list[int]] = []
    for size in sizes:
        plan.append([0 if rng.random() < BIG_SHARE else rng.randrange(1, CLINICS) for _ in range(size)])
    per_clinic = Counter(i for run in plan for i in run)
    log(f"storm: booking {sum(per_clinic.values()):,} CONFIRMED appointments (appointment_book)")
    base = _day_start() + timedelta(days=3)
    refs: dict[int, list[str]] = {}
    for i, count in per_clinic.items():
        clinic = clinics[i]
        docs, treatment = clinic.bench_practitioners, clinic.bench_treatments[0]
        first, last = clinic.bench_patient_range
        patients = list(Patient.objects.filter(clinic=clinic, pk__in=rng.sample(range(first, last + 1), count)))
        refs[i] = []
        for j in range(count):
            slot = j // len(docs)  # 16 half-hour slots a day per practitioner, from day 3 on
            starts = base + timedelta(days=slot // 16, minutes=30 * (slot % 16))
            appointment = appointment_book(clinic=clinic, patient=patients[j], practitioner=docs[j % len(docs)],
                                           treatment=treatment, starts_at=starts, status="CONFIRMED")
            refs[i].append(appointment.ref)
        rng.shuffle(refs[i])
    runs_plan = []
    taken = Counter()
    for run in plan:
        items = []
        for i in run:
            items.append((clinics[i].ref, refs[i][taken[i]]))
            taken[i] += 1
        runs_plan.append(items)
    db.analyze("waitlist_waitlistentry", "scheduling_patient", "scheduling_contactconsent",
               "waitlist_bookingreliabilitydecision", "scheduling_appointment", "scheduling_capacityallocation")
    user, token = db.staff_user(clinics[0], "bench-storm-staff")
    for clinic in clinics[1:]:
        clinic_grant_role(clinic=clinic, user=user, role=Role.STAFF)
    return {"clinics": clinics, "plan": runs_plan, "user": user, "token": token}


def _day_start():
    from django.utils import timezone

    return timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)


def session_cookie(user) -> str:
    """A signed-in console session for ``user`` (as after the sign-in page), for the staff load."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


# --- the load ----------------------------------------------------------------------------------


class Storm:
    """One run's load: paced cancellations, claims of received notices, console page loads."""

    def __init__(self, base_url: str, token: str, session: str, items: list[tuple[str, str]], seconds: float,
                 receiver_log: Path, clinic_refs: list[str]):
        self.base, self.token, self.session = base_url, token, session
        self.items, self.seconds = items, seconds
        self.receiver_log = receiver_log
        self.clinic_refs = clinic_refs
        self.lock = threading.Lock()
        self.next_item = 0
        self.cancels: list[dict] = []
        self.claims: list[dict] = []
        self.console: list[dict] = []
        self.notices: list[tuple[float, str, str, str]] = []
        self.storming = threading.Event()
        self.stop_all = threading.Event()
        self.claim_queue: list[str] = []
        self.claim_cv = threading.Condition()
        self.t0 = 0.0

    # cancellations
    def _sender(self) -> None:
        import requests

        http = requests.Session()
        http.headers["Authorization"] = f"Token {self.token}"
        interval = self.seconds / max(len(self.items), 1)
        while True:
            with self.lock:
                index = self.next_item
                self.next_item += 1
            if index >= len(self.items):
                return
            due = self.t0 + index * interval
            pause = due - time.time()
            if pause > 0:
                time.sleep(pause)
            clinic_ref, appointment_ref = self.items[index]
            sent = time.time()
            try:
                response = http.post(f"{self.base}/api/v1/clinics/{clinic_ref}/appointments/{appointment_ref}/cancel",
                                     json={"reason": "storm"}, headers={"Idempotency-Key": uuid.uuid4().hex},
                                     timeout=60)
                status, body = response.status_code, (response.json() if response.status_code == 200 else {})
            except Exception as exc:  # noqa: BLE001 - counted as an error of the run
                status, body = f"error {type(exc).__name__}", {}
            answered = time.time()
            with self.lock:
                self.cancels.append({"clinic": clinic_ref, "appointment": appointment_ref, "due": due, "sent": sent,
                                     "answered": answered, "status": status, "vacancy": body.get("vacancy")})

    # notices and claims
    def _tail(self) -> None:
        with open(self.receiver_log) as f:
            f.seek(0, 2)
            buffer = ""
            while not self.stop_all.is_set():
                chunk = f.read()
                if not chunk:
                    time.sleep(0.02)
                    continue
                buffer += chunk
                *lines, buffer = buffer.split("\n")
                for line in lines:
                    arrived, ref, key, link = line.split("\t")
                    self.notices.append((float(arrived), ref, key, link))
                    # About 10 % of the patients answer, chosen by the message (stable between runs).
                    draw = int(hashlib.sha256(ref.encode()).hexdigest()[:8], 16) % 1000
                    if ref != "BAD" and draw < CLAIM_SHARE * 1000:
                        with self.claim_cv:
                            self.claim_queue.append((ref, link))
                            self.claim_cv.notify()

    def _claimer(self) -> None:
        import requests

        while True:
            with self.claim_cv:
                while not self.claim_queue and not self.stop_all.is_set():
                    self.claim_cv.wait(0.2)
                if not self.claim_queue:
                    from django.db import connection

                    connection.close()
                    return
                ref, link = self.claim_queue.pop(0)
            # Only offer notices ask for an answer (a booking confirmation's link shows the booking).
            topic = db.sql("SELECT topic FROM common_outboxmessage WHERE ref = %s", [ref])
            if not topic or topic[0][0] != OFFER_TOPIC:
                continue
            http = requests.Session()  # a patient's phone: its own cookies
            record = {"link_ms": None, "claim_ms": None, "status": None}
            try:
                start = time.perf_counter()
                page = http.get(link, timeout=30)
                record["link_ms"] = (time.perf_counter() - start) * 1000
                token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
                if page.status_code != 200 or token is None:
                    record["status"] = f"page {page.status_code}"
                    title = re.search(r"<h1[^>]*>(.*?)</h1>", page.text, re.S)
                    record["page"] = (title.group(1).strip() if title else page.text[:200])[:200]
                else:
                    start = time.perf_counter()
                    answer = http.post(link, data={"csrfmiddlewaretoken": token.group(1), "action": "accept"},
                                       headers={"Referer": link}, timeout=30)
                    record["claim_ms"] = (time.perf_counter() - start) * 1000
                    record["status"] = answer.status_code
                    if answer.status_code != 200:
                        record["page"] = answer.text[:200]
            except Exception as exc:  # noqa: BLE001 - counted as an error
                record["status"] = f"error {type(exc).__name__}"
            record["link"] = link
            with self.lock:
                self.claims.append(record)

    # staff
    def _staff(self, seed: int) -> None:
        import requests

        rng = random.Random(seed)
        http = requests.Session()
        http.cookies.set("sessionid", self.session)
        while not self.storming.is_set():
            time.sleep(0.05)
        while self.storming.is_set() and not self.stop_all.is_set():
            ref = self.clinic_refs[0] if rng.random() < BIG_SHARE else rng.choice(self.clinic_refs[1:])
            start, started = time.perf_counter(), time.time()
            try:
                status = http.get(f"{self.base}/console/c/{ref}/waitlist/", timeout=30,
                                  allow_redirects=False).status_code
            except Exception as exc:  # noqa: BLE001
                status = f"error {type(exc).__name__}"
            with self.lock:
                self.console.append({"ms": (time.perf_counter() - start) * 1000, "status": status,
                                     "big": ref == self.clinic_refs[0], "started": started})
            time.sleep(CONSOLE_PAUSE_S)

    def _backlog(self, vacancy_refs: list[str]) -> tuple[int, int, int]:
        """(outbox rows not yet finished in the storm's clinics, this run's vacancies not yet settled, offers)."""
        row = db.sql("""SELECT (SELECT count(*) FROM common_outboxmessage WHERE clinic_ref = ANY(%(r)s)
                                  AND status IN ('PENDING', 'LEASED')),
                               (SELECT count(*) FROM waitlist_vacancy v WHERE v.ref = ANY(%(v)s)
                                  AND v.status = 'OPEN' AND v.exhausted_at IS NULL
                                  AND NOT EXISTS (SELECT 1 FROM waitlist_offer o WHERE o.vacancy_id = v.id)),
                               (SELECT count(*) FROM waitlist_offer o JOIN waitlist_vacancy v ON v.id = o.vacancy_id
                                  WHERE v.ref = ANY(%(v)s))""", {"r": self.clinic_refs, "v": vacancy_refs})[0]
        return row[0], row[1], row[2]

    def run(self) -> dict:
        threads = [threading.Thread(target=self._tail, daemon=True)]
        threads += [threading.Thread(target=self._claimer, daemon=True) for _ in range(CLAIMERS)]
        staff = [threading.Thread(target=self._staff, args=(i,), daemon=True) for i in range(CONSOLE_USERS)]
        for t in threads + staff:
            t.start()
        time.sleep(0.3)
        self.t0 = time.time() + 0.2
        self.storming.set()
        senders = [threading.Thread(target=self._sender, daemon=True) for _ in range(SENDERS)]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        last_cancel = time.time()
        log(f"storm: {len(self.cancels)} cancellations sent in {last_cancel - self.t0:.1f} s; draining")
        # Drain: until every vacancy of this run is settled (offered, or dispatch found nobody, or closed) and the
        # clinics' outbox is empty; or nothing moved for DRAIN_IDLE_S; or DRAIN_MAX_S in all.
        refs = [c["vacancy"] for c in self.cancels if c.get("vacancy")]
        last_state, last_progress = None, time.time()
        while time.time() - last_cancel < DRAIN_MAX_S:
            state = self._backlog(refs)
            if state != last_state:
                last_state, last_progress = state, time.time()
            if state[0] == 0 and state[1] == 0 or time.time() - last_progress > DRAIN_IDLE_S:
                break
            time.sleep(0.5)
        self.storming.clear()
        for t in staff:
            t.join()
        # Claims already queued still go out (their latency is part of the storm's tail).
        deadline = time.time() + 60
        while time.time() < deadline:
            with self.claim_cv:
                if not self.claim_queue:
                    break
            time.sleep(0.1)
        self.stop_all.set()
        for t in threads:
            t.join(timeout=60)
        return {"t0": self.t0, "last_cancel": last_cancel, "drained_at": time.time()}


# --- pgbench -----------------------------------------------------------------------------------


def _pgbench_db() -> str:
    return f"{db.db_name(db.bench_url())}_pgbench"


def pgbench_init(scale_factor: int) -> None:
    import psycopg

    with psycopg.connect(db.admin_dsn(db.bench_url()), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{_pgbench_db()}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{_pgbench_db()}"')
    url = db.url_with_db(db.bench_url(), _pgbench_db())
    subprocess.run(["pgbench", "-i", "-q", "-s", str(scale_factor), url], check=True, capture_output=True)


def pgbench_run(seconds: int, clients: int) -> float:
    url = db.url_with_db(db.bench_url(), _pgbench_db())
    out = subprocess.run(["pgbench", "-n", "-c", str(clients), "-j", "2", "-T", str(seconds), url], check=True,
                         capture_output=True, text=True, timeout=seconds + 120)
    match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out.stdout) or re.search(
        r"tps = ([0-9.]+)", out.stdout)
    return float(match.group(1))


# --- analysis ----------------------------------------------------------------------------------


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far (/proc/stat): idle and iowait are not busy."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def _own_cpu() -> float:
    """CPU seconds of this process (every thread) so far."""
    t = os.times()
    return t.user + t.system


class PgCpuSampler:
    """CPU seconds of the PostgreSQL backends serving the bench database during a run, those that closed before
    its end included (web and worker close theirs after ``DATABASE_CONN_MAX_AGE``, 300 s): /proc is polled every
    half second and a backend keeps what the last poll saw of it. Reading only the backends alive at the end
    missed about half of PostgreSQL's time in a two-minute storm."""

    def __init__(self, dbname: str) -> None:
        self.dbname = dbname
        self.tick = os.sysconf("SC_CLK_TCK")
        self.base: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _backends(self) -> dict[str, int]:
        out = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                if not cmd.startswith(b"postgres: ") or f" {self.dbname} ".encode() not in cmd.replace(b"\0", b" "):
                    continue
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                out[pid] = int(fields[11]) + int(fields[12])
            except (OSError, IndexError, ValueError):
                continue
        return out

    def _poll(self) -> None:
        while not self.stop_event.wait(0.5):
            self.last.update(self._backends())

    def start(self) -> None:
        self.base = self._backends()
        self.last = dict(self.base)
        self.thread.start()

    def stop(self) -> float:
        self.stop_event.set()
        self.thread.join()
        self.last.update(self._backends())
        return sum(t - self.base.get(pid, 0) for pid, t in self.last.items()) / self.tick


def _pcts(values: list[float]) -> dict:
    return {"p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99),
            "max": max(values) if values else math.nan, "n": len(values)}


def analyse(storm: Storm, times: dict, clinics) -> dict:
    """Join the run's cancellations, notices and claims with the database; check the invariants."""
    from observability.invariants import check

    clinic_ids = [c.pk for c in clinics]
    big_ref = clinics[0].ref
    cancels = storm.cancels
    ok_cancels = [c for c in cancels if c["status"] == 200]
    vacancies = {c["vacancy"]: c for c in ok_cancels if c["vacancy"]}
    # Every notice: its message → offer → vacancy.
    rows = db.sql(
        """SELECT m.ref, v.ref, o.ref FROM common_outboxmessage m
           JOIN waitlist_offer o ON o.ref = m.aggregate_ref AND o.clinic_id = ANY(%(c)s)
           JOIN waitlist_vacancy v ON v.id = o.vacancy_id
           WHERE m.topic = 'waitlist.offer_made' AND m.clinic_ref = ANY(%(r)s)""",
        {"c": clinic_ids, "r": [c.ref for c in clinics]},
    )
    vacancy_of = {m: v for m, v, _o in rows}
    first: dict[str, float] = {}
    per_message = Counter()
    for arrived, ref, _key, _link in storm.notices:
        per_message[ref] += 1
        vacancy = vacancy_of.get(ref)
        if vacancy in vacancies and (vacancy not in first or arrived < first[vacancy]):
            first[vacancy] = arrived
    latency = {v: (first[v] - c["answered"]) * 1000 for v, c in vacancies.items() if v in first}
    lat_all = list(latency.values())
    lat_big = [ms for v, ms in latency.items() if vacancies[v]["clinic"] == big_ref]
    lat_small = [ms for v, ms in latency.items() if vacancies[v]["clinic"] != big_ref]
    arrivals = sorted(a for a, *_ in storm.notices)
    span = (arrivals[-1] - times["t0"]) if arrivals else math.nan
    claims_ok = [c for c in storm.claims if c["status"] == 200]
    claim_ms = [c["claim_ms"] for c in storm.claims if c["claim_ms"] is not None]
    console_ms = [c["ms"] for c in storm.console]
    # The database after the run: what every cancellation, offer and claim left.
    report = check(clinic_ids)
    extra = db.sql(
        """SELECT
             (SELECT count(*) FROM scheduling_appointment a WHERE a.clinic_id = ANY(%(c)s) AND a.status = 'CANCELLED'
                AND NOT EXISTS (SELECT 1 FROM waitlist_vacancy v WHERE v.source_appointment_id = a.id)),
             (SELECT count(*) FROM (SELECT m.aggregate_ref FROM common_outboxmessage m
                WHERE m.topic = 'waitlist.offer_made' AND m.clinic_ref = ANY(%(r)s)
                GROUP BY m.aggregate_ref HAVING count(*) > 1) x),
             (SELECT count(*) FROM waitlist_offer o WHERE o.clinic_id = ANY(%(c)s) AND o.status = 'ACCEPTED'),
             (SELECT count(*) FROM common_outboxmessage m WHERE m.clinic_ref = ANY(%(r)s) AND m.status <> 'SENT'),
             (SELECT count(*) FROM waitlist_vacancy v WHERE v.clinic_id = ANY(%(c)s) AND v.status = 'OPEN'
                AND NOT EXISTS (SELECT 1 FROM waitlist_offer o WHERE o.vacancy_id = v.id))""",
        {"c": clinic_ids, "r": [c.ref for c in clinics]},
    )[0]
    checks = {
        "cancellations_without_a_vacancy": extra[0],
        "offers_with_more_than_one_notice": extra[1],
        "notices_received_more_than_once": sum(1 for n in per_message.values() if n > 1),
        "notices_with_a_bad_signature": per_message.get("BAD", 0),
        "cancellations_answered_without_a_vacancy": sum(1 for c in ok_cancels if not c["vacancy"]),
    }
    invariants_ok = report.ok and not any(checks.values())
    return {
        "cancellations": len(cancels),
        "cancellation_errors": len(cancels) - len(ok_cancels),
        "cancel_send_seconds": times["last_cancel"] - times["t0"],
        "cancel_ms": _pcts([(c["answered"] - c["sent"]) * 1000 for c in ok_cancels]),
        "cancel_lag_ms": _pcts([(c["sent"] - c["due"]) * 1000 for c in cancels]),
        "vacancies": len(vacancies),
        "vacancies_without_notice": len(vacancies) - len(latency),
        "first_notice_ms": _pcts(lat_all),
        "first_notice_ms_big": _pcts(lat_big),
        "first_notice_ms_small": _pcts(lat_small),
        "small_p99_over_big_p99": (percentile(lat_small, 99) / percentile(lat_big, 99)) if lat_big and lat_small
        else math.nan,
        "notices": len(storm.notices),
        "offer_notices": sum(1 for _a, ref, *_ in storm.notices if ref in vacancy_of),
        "notices_per_s": len(storm.notices) / span if span and span > 0 else math.nan,
        "notice_span_s": span,
        "claims": len(storm.claims),
        "claims_ok": len(claims_ok),
        "claim_errors": len(storm.claims) - len(claims_ok),
        "claim_statuses": dict(Counter(str(c["status"]) for c in storm.claims)),
        "claim_ms": _pcts(claim_ms),
        "claim_link_ms": _pcts([c["link_ms"] for c in storm.claims if c["link_ms"] is not None]),
        "offers_accepted": extra[2],
        "console_ms": _pcts(console_ms),
        # The slowest loads, when into the storm they started (s) and how long they took: a tail at the start
        # is a cold process, one throughout is load.
        "console_slowest": [[round(c["started"] - times["t0"], 1), round(c["ms"]), c["big"]]
                            for c in sorted(storm.console, key=lambda c: -c["ms"])[:5]],
        "console_statuses": dict(Counter(str(c["status"]) for c in storm.console)),
        "console_errors": sum(1 for c in storm.console if c["status"] != 200),
        "outbox_not_sent": extra[3],
        "open_vacancies_never_offered": extra[4],
        "invariants": report.violations,
        "totals": report.totals,
        "checks": checks,
        "invariants_ok": invariants_ok,
    }


# --- the benchmark -----------------------------------------------------------------------------


def run() -> Result:
    cfg = scale()
    n, seconds, runs_n = cfg["storm_cancellations"], cfg["storm_seconds"], cfg["runs"]
    # A lighter or shorter storm for an experiment (the committed results use the scale's own figures).
    n = int(os.environ.get("BENCH_STORM_CANCELLATIONS", n))
    runs_n = int(os.environ.get("BENCH_STORM_RUNS", runs_n))
    result = Result("storm", f"6. The storm: {n:,} cancellations in {seconds} s over {CLINICS} clinics, the loop as "
                             "`make run` deploys it")
    if shutil.which("pgbench") is None:
        result.status = "skipped: pgbench not installed (make bench installs it with apt)"
        return result
    receiver_port = free_port()
    receiver_url = f"http://{HOST}:{receiver_port}/notice"
    warmup = max(n // WARMUP_SHARE, 1)
    log(f"storm: building {CLINICS} clinics and {n * runs_n + warmup:,} appointments")
    world = build_world(receiver_url, [warmup] + [n] * runs_n)
    clinics = world["clinics"]
    session = session_cookie(world["user"])
    log("storm: pgbench -i")
    pgbench_init(cfg["pgbench_scale"])
    receiver_log = Path(f"/tmp/cw-bench-receiver-{receiver_port}.log")
    receiver_log.write_text("")
    dep = deployment({
        "NOTIFY_WEBHOOK_SECRET": SECRET,
        # One STAFF token sends every cancellation, and every patient claims from 127.0.0.1: the per-user
        # and per-address throttles would otherwise be what is measured (they still run).
        "API_THROTTLE_USER": "10000000/min",
        "PATIENT_PAGE_THROTTLE_ADDRESS": "10000000/min",
        "LOG_LEVEL": "WARNING",
    })
    from django.db import connections

    connections.close_all()
    subprocess.run([str(Path(sys.executable).parent / "celery"), "-A", "config", "purge", "-f"], env=dep.env,
                   capture_output=True)
    runs = []
    try:
        dep.start(receiver=[sys.executable, "-m", "bench.receiver", str(receiver_port), str(receiver_log), SECRET])
        time.sleep(3)  # beat's first ticks and the worker's warm-up
        # A short storm first, not counted: a clinic's tables hold history, the bench's start empty (planned as
        # empty until autovacuum's next analyze), and each process prepares its statements on first use. Before
        # it the first run cost about 45 % more CPU per cancellation than the next (2026-12-03, full scale).
        items = world["plan"][0]
        warm_seconds = max(seconds * len(items) / n, 1)
        log(f"storm: warm-up: {len(items):,} cancellations over {warm_seconds:.0f} s (not counted)")
        Storm(dep.url, world["token"], session, items, warm_seconds, receiver_log, [c.ref for c in clinics]).run()
        connections.close_all()
        db.analyze(*WARMED_TABLES)
        for run_no in range(runs_n):
            items = world["plan"][run_no + 1]
            log(f"storm: run {run_no + 1}: {len(items):,} cancellations over {seconds} s")
            pg = PgCpuSampler(connections["default"].settings_dict["NAME"])
            pg.start()
            cpu_before, own_before = dep.cpu_seconds(), _own_cpu()
            machine_before = _machine_ticks()
            storm = Storm(dep.url, world["token"], session, items, seconds, receiver_log, [c.ref for c in clinics])
            times = storm.run()
            cpu_after, own_after = dep.cpu_seconds(), _own_cpu()
            pg_seconds = pg.stop()
            machine_after = _machine_ticks()
            connections.close_all()
            r = analyse(storm, times, clinics)
            r["cpu_seconds"] = {k: round(cpu_after.get(k, 0) - cpu_before.get(k, 0), 1) for k in cpu_after}
            r["cpu_seconds"]["postgresql"] = round(pg_seconds, 1)
            r["cpu_ms_per_cancellation"] = {k: 1000 * v / max(len(items), 1) for k, v in r["cpu_seconds"].items()}
            # The load itself (this process: senders, claimers, staff, the receiver log's tail) shares the cores.
            r["load_generator_cpu_ms_per_cancellation"] = 1000 * (own_after - own_before) / max(len(items), 1)
            # Every process on the machine, from the first cancellation to the end of the drain: how close to
            # saturated the cores were (the per-process figures miss backends that closed during the run).
            busy, total = (a - b for a, b in zip(machine_after, machine_before, strict=True))
            r["machine_busy_share"] = busy / total if total else math.nan
            log(f"storm: run {run_no + 1}: pgbench {cfg['storm_pgbench_seconds']} s at {PGBENCH_CLIENTS} clients")
            r["pgbench_tps"] = pgbench_run(cfg["storm_pgbench_seconds"], PGBENCH_CLIENTS)
            fn = r["first_notice_ms"]
            log(f"storm: run {run_no + 1}: first notice p50 {fmt(fn['p50'])} p99 {fmt(fn['p99'])} max "
                f"{fmt(fn['max'])} ms, {fmt(r['notices_per_s'])} notices/s, {r['vacancies_without_notice']} without, "
                f"claims {r['claims_ok']}/{r['claims']} p99 {fmt(r['claim_ms']['p99'])} ms, console p99 "
                f"{fmt(r['console_ms']['p99'])} ms, pgbench {r['pgbench_tps']:.0f} tps, invariants "
                f"{'OK' if r['invariants_ok'] else 'VIOLATED ' + str(r['checks']) + str(report_failed(r))}")
            runs.append(r)
    finally:
        dep.stop()
    result.data = summarise(runs, cfg)
    describe(result, cfg)
    return result


def report_failed(r: dict) -> dict:
    return {k: v for k, v in r["invariants"].items() if v}


def summarise(runs: list[dict], cfg: dict) -> dict:
    def s(path: str) -> dict:
        keys = path.split(".")

        def get(r):
            for k in keys:
                r = r[k]
            return r

        return stat(get(r) for r in runs)

    return {
        "runs": runs,
        "cancellations": runs[0]["cancellations"],
        "seconds": cfg["storm_seconds"],
        "pgbench_seconds": cfg["storm_pgbench_seconds"],
        "clinics": CLINICS,
        "first_notice_ms": {k: s(f"first_notice_ms.{k}") for k in ("p50", "p90", "p99", "max")},
        "first_notice_ms_big": {k: s(f"first_notice_ms_big.{k}") for k in ("p50", "p99")},
        "first_notice_ms_small": {k: s(f"first_notice_ms_small.{k}") for k in ("p50", "p99")},
        "small_p99_over_big_p99": s("small_p99_over_big_p99"),
        "notices_per_s": s("notices_per_s"),
        "vacancies_without_notice": s("vacancies_without_notice"),
        "claim_ms": {k: s(f"claim_ms.{k}") for k in ("p50", "p99")},
        "claims": s("claims"),
        "claim_errors": s("claim_errors"),
        "console_ms": {k: s(f"console_ms.{k}") for k in ("p50", "p99")},
        "console_errors": s("console_errors"),
        "cancel_ms": {k: s(f"cancel_ms.{k}") for k in ("p50", "p99")},
        "cancellation_errors": s("cancellation_errors"),
        "cancel_send_seconds": s("cancel_send_seconds"),
        "pgbench_tps": s("pgbench_tps"),
        "invariants_ok_every_run": all(r["invariants_ok"] for r in runs),
        "cpu_ms_per_cancellation": {k: s(f"cpu_ms_per_cancellation.{k}") for k in runs[0]["cpu_ms_per_cancellation"]},
        "load_generator_cpu_ms_per_cancellation": (
            s("load_generator_cpu_ms_per_cancellation") if "load_generator_cpu_ms_per_cancellation" in runs[0]
            else None),
        "machine_busy_share": s("machine_busy_share") if "machine_busy_share" in runs[0] else None,
    }


def method_note(d: dict) -> str:
    return (
        f"**What runs.** The deployment `make run` starts, on loopback: gunicorn `config.wsgi` (2 workers × 4 "
        f"threads), one Celery worker (`-Q delivery,reevaluation,maintenance --concurrency 2`) and Celery beat with "
        f"the shipped schedule (`bench/deployment.py`; the access log off), against the bench database. "
        f"{d['clinics']} clinics, each its own tenant group: one big (20 practitioners, `storm_big_entries` waiting "
        f"entries) and {d['clinics'] - 1} small (5 practitioners, `storm_small_entries`), the bench's shape of "
        f"waitlist (`bench/db.py`: 30 % name a practitioner, 7-day windows over 40 days, FRESH decisions, EMAIL and "
        f"SMS consent), no quiet hours, and `settings.notification` = the webhook provider pointed at "
        f"`bench/receiver.py` (a threaded HTTP server that checks each POST's HMAC signature and writes its arrival "
        f"time). Each run cancels its own {d['cancellations']:,} CONFIRMED appointments (booked beforehand with "
        f"`appointment_book`, from day 3 on), a third of them in the big clinic, the rest uniform over the others: "
        f"an open-loop schedule over {d['seconds']} s (`POST …/appointments/{{ref}}/cancel` with an Idempotency-Key, "
        f"{SENDERS} sending threads, one STAFF token; a request leaves at its time or as soon as a thread is free). "
        f"Before the counted runs a warm-up storm of a {WARMUP_SHARE}th of a run's cancellations at the same rate, "
        "not counted, then `VACUUM ANALYZE` of the tables it grew (a live clinic's tables hold history and "
        "autovacuum keeps their statistics; the bench's start empty). "
        f"A patient answers about {CLAIM_SHARE:.0%} of the offer notices (chosen by a hash of the message): "
        f"{CLAIMERS} threads open the notice's claim link (GET, for the CSRF token) and accept (POST, timed: "
        f"`offer_claim_and_book`, claim and book). {CONSOLE_USERS} signed-in STAFF reload the console's waitlist "
        f"page every {CONSOLE_PAUSE_S} s (the big clinic a third of the time). After the last cancellation the run "
        f"waits until every vacancy of the run is settled (offered, or dispatch found nobody) and the clinics' "
        f"outbox is empty (giving up after {DRAIN_IDLE_S} s without progress or {DRAIN_MAX_S} s in all). "
        f"**First notice** = the receiver's arrival time of the first offer notice of the "
        f"cancellation's vacancy minus the time the cancellation's answer arrived (one clock: everything is on this "
        f"machine). Then, in the same run, `pgbench -c {PGBENCH_CLIENTS} -j 2 -T {d.get('pgbench_seconds', 15)}` "
        f"(TPC-B-like, "
        f"scale 10) on the same server, and the invariant checker (`observability.invariants.check` over the storm's "
        f"clinics: one active offer per vacancy and per entry, holds and allocations, no CONFIRMED double booking, "
        f"one creation event per offer, outbox delivered at most once) plus this benchmark's own checks: every "
        f"cancelled CONFIRMED appointment has its vacancy and every cancellation answered with one, no offer has "
        f"two notices in the outbox, no notice reached the receiver twice, every signature was good. The API and "
        f"patient-page throttles are raised for the server under test (one token and one address send everything); "
        f"they still run."
    )


def limits_note(d: dict) -> str:
    cpu = {k: v["median"] for k, v in d["cpu_ms_per_cancellation"].items()}
    total = sum(cpu.values())
    fn = d["first_notice_ms"]
    rate = d["cancellations"] / d["seconds"]
    busy = d.get("machine_busy_share")
    keeps_up = d["notices_per_s"]["median"] >= 0.95 * rate
    slow = sum(1 for r in d["runs"] if r["first_notice_ms"]["p99"] > 10_000)
    return (
        "**What limits it.** A cancellation's vacancy is dispatched by a Celery task queued after its commit, and "
        "that task delivers the new offer's notice itself (`outbox_deliver_written`, `waitlist/tasks.py`): before "
        "2026-12-03 it queued a `deliver_notices` run for it (one more task, a Redis kick and a broker round trip "
        "per notice), and before that notices waited for beat's `deliver-outbox` tick (every 10 s, 50 rows: 5 "
        "notices/s at most, first notice p50 43–50 s in this quick storm). "
        f"What is left is CPU: each cancellation, with everything that followed it (its dispatch, the notice, the "
        f"claims and console loads around it, beat), cost {fmt(total)} ms of CPU here "
        f"({', '.join(f'{k} {fmt(v)}' for k, v in cpu.items())} ms; PostgreSQL's backends are polled through the run, "
        "so those web and worker close after `DATABASE_CONN_MAX_AGE` count too: reading only the ones alive at the "
        f"end had shown about half), so {rate:.0f} cancellations/s ask for {fmt(rate * total / 1000)} of the "
        "machine's 2 cores"
        + (f", and the whole machine was busy {fmt(100 * busy['median'])} % of the run" if busy else "")
        + ". "
        + (f"Notices keep up with the cancellations ({fmt(d['notices_per_s']['median'])} a second against "
           f"{rate:.1f}), so the first-notice time (p50 {fmt(fn['p50']['median'])} ms) is mostly the loop's own "
           + (f"latency; the margin is thin, though: {slow} of {len(d['runs'])} runs let a queue build (first "
              f"notice p99 up to {fmt(fn['p99']['max'])} ms), whenever the machine's share left for the loop "
              "dipped. " if slow else
              f"latency, and no run let a queue build (first notice p99 at most {fmt(fn['p99']['max'])} ms). ")
           if keeps_up else
           f"Notices fall behind ({fmt(d['notices_per_s']['median'])} a second against {rate:.1f}), so the "
           f"dispatch queue grows for the whole storm and the first-notice time (p50 {fmt(fn['p50']['median'])} "
           "ms) is mostly waiting in it. ")
        + "The gains of 2026-12-03, each measured by a one-run full storm (5,000 in 2 minutes, 41.7/s) on a 2-core "
        "machine faster than the one of 2026-12-04 (one claim in process 2.6 ms there against 6.7; its three-run "
        "full storm gave 44.4 notices/s, first notice p50 1,039 ms and p99 2,602 ms, 38.3 ms of CPU a "
        "cancellation): 29.5 notices/s before; 33.6 with the dispatch task "
        "delivering its own notice (worker CPU 21.9 → "
        "19.3 ms a cancellation); 36.1 with the outbox leasing in one statement (`UPDATE … WHERE id IN (SELECT … FOR "
        "NO KEY UPDATE SKIP LOCKED) RETURNING`, was five) and recording an attempt with its fence in one (was four), "
        "and a cancellation's two row locks read through prepared statements (their ORM building was a tenth of the "
        "web's samples under py-spy), the machine then 97 % busy; 41.4 with the readiness panel's decision "
        "freshness kept and the fairness figures refreshed every 5 minutes (below); then the background dispatch's "
        "vacancy read prepared and the warm-up run (method) before these three runs. Under "
        "`pg_stat_statements` in a quick storm the readiness panel's decision freshness (every WAITING patient's "
        "newest decision, counted) was 28 % of PostgreSQL's statement time, at 12 ms a console load at the big "
        "clinic: it was then kept `WAITLIST_READINESS_CACHE_SECONDS` (10) per clinic. The console's 30-day fairness "
        "figures (the pass-over count joins every offer of the window with the entries that waited longer: "
        "0.3–0.7 s of SQL at the big clinic once a storm has made a few hundred offers, and two staff members "
        "paid it together when a 30 s bucket turned over: console p99 0.6–2.4 s) are kept per clinic and "
        "recomputed by one background task (`waitlist.tasks.refresh_fairness`) once older than "
        "`WAITLIST_FAIRNESS_CACHE_SECONDS` (then 300), so no load waits for them. The claim page reads its offer "
        "through prepared statements and skips the renewal read for an offer that is not EXPIRED (POST accept 54 "
        "→ 24 ms warm in-process; claims p50 in the quick storm 167 → 54 ms). "
        "The gains of 2026-12-04, measured on a 2-core machine slower at small statements than the one of these "
        "results (pgbench 1,800–3,300 tps in the same runs; the committed results were not re-run there): a "
        "delivered notice recorded in one statement (`_NOTICE_DELIVERED_SQL`: the offer locked, the hold extended "
        "only when the window grows, the event; no transaction of its own) and the current policy read with the "
        "offer, the contact cap's and the consent's reads prepared: 12 → 6 statements a notice, 67 → 121 notices/s "
        "for one process (`python -m bench.dispatch_profile --deliver`); the console's fill metrics, outbox "
        "health and provider streak kept like the decision freshness (a load at the big clinic 23 → 18 "
        "statements, 91 → 43 ms in process); a quick storm's CPU a cancellation 71.8 → 62.2 ms (worker 24.8 → "
        "19), the full storm's 61.5 → 43.3–47.2 ms (web 14–15, worker 14–15, PostgreSQL 15–16), first notice p50 "
        "39 s → 2.1–5.5 s in its better runs, the machine still 96–97 % busy, so there part 1's targets are not "
        "met (claims p99 272–287 ms). Found there: the fairness refresh every 5 minutes fell inside a run and "
        "cost it 40 s of PostgreSQL's CPU (the pass-over count at the big clinic after 5,000 offers over 30,000 "
        "entries: 9.6 million pass-overs, 67 s of SQL); it now reads the window's offers first (40 s, the same "
        "counts) and waits `FAIRNESS_COST_FACTOR` (20) times its last duration before the next refresh. "
        "The gains of 2026-12-04's second session, on a machine of the same kind (pgbench about 3,100 tps): a "
        "tier's first page read as a probe of 8 rows, then its rest only when none of those was promoted "
        "(`waitlist.dispatch.matcher.PROBE_ROWS`: both tiers' full first pages, 100 rows with their eligibility "
        "subqueries "
        "and decisions, were the largest statement of a dispatch: 3.2–4.8 → about 1.4 ms); the decision freshness "
        "counts kept a minute (`WAITLIST_DECISION_FRESHNESS_CACHE_SECONDS`: with consoles open at 50 clinics, "
        "kept 10 s they were recomputed on almost every load, 30 ms of SQL each); prepared statements' placeholder "
        "parsing cached at any length (psycopg parses statements over 4 KB or 50 parameters again on every call: "
        "the matcher's page and promotion's statement); the webhook provider posting through urllib3 (`requests` "
        "read the environment's proxies, netrc and CA settings on every POST: half of a notice's send). A quick "
        "storm's CPU a cancellation 55.5 → 44.5 ms; one full-storm run 43–47 → 35.2 ms (web 12, worker 11, "
        "PostgreSQL 11), the machine 83 % busy, first notice p50 20 ms and p99 0.6 s. Then a cancellation in 10 "
        "statements instead of 18 (no savepoints: its refusals come before its first write, "
        "`common.transactions.own_transaction`; the appointment's cancel and its slot's release in one prepared "
        "statement shared with reevaluation's batch), the outbox's attempt record prepared, the ORM's INSERT "
        "text compiled once per model, and connections kept 300 s and 10,000 tasks (at 200 tasks a pool process "
        "reconnected every few seconds, and each new connection planned the hot path's prepared statements again, "
        "up to six times each: 7–13 ms a plan for the notice's and the claim's reads, a third of PostgreSQL's "
        "planning in the storm). Found there: the 30-day fairness figures, refreshed every 5 minutes per clinic, "
        "cost one run 13 s of PostgreSQL's CPU (375 ms each with 6,000 offers in the window; the run's first-notice "
        "p99 rose to 4.6 s), now every half hour (`WAITLIST_FAIRNESS_CACHE_SECONDS` 1800); and the bench's cache "
        "kept an earlier run's figures under the same clinic ids, so a new run refreshed them all at once (`make "
        "bench` now deletes its cache keys when it recreates its database). "
        f"Console p99 {fmt(d['console_ms']['p99']['median'])} ms and claims p99 "
        f"{fmt(d['claim_ms']['p99']['median'])} ms (GET the link, POST accept: claim and book) here. Kept from "
        "before: the webhook provider keeps one connection to the gateway per worker process "
        "(`common.notify._pool`: first notice p50 508 → 199 ms in a one-run comparison), the worker keeps "
        "its database connection across tasks (`CELERY_DB_REUSE_MAX`: Celery's Django fixup closed it after every "
        "task, so each task paid a new backend and re-prepared its statements), and a claim whose offer's version "
        "only moved (the delivery's own bookkeeping) claims once more at the current version "
        f"(`waitlist/offers/accept.py`); claim errors in these runs: {fmt(d['claim_errors']['max'])} at most. "
        "The figure to compare between machines is the notices per second against pgbench's tps in the same run "
        f"({fmt(d['notices_per_s']['median'])} ÷ {fmt(d['pgbench_tps']['median'])} = "
        f"{fmt(d['notices_per_s']['median'] / d['pgbench_tps']['median'])})."
    )


def describe(result: Result, cfg: dict) -> None:
    d = result.data
    result.note(method_note(d))
    result.note(limits_note(d))
    fn = d["first_notice_ms"]
    result.table(
        f"The storm: {d['cancellations']:,} cancellations in {d['seconds']} s (median (min–max) over "
        f"{len(d['runs'])} runs)",
        ["figure", "value", "target"],
        [
            ["first notice after the cancellation's answer, p50 (ms)", fmt_stat(fn["p50"]), "≤ 2,000"],
            ["… p90 (ms)", fmt_stat(fn["p90"]), ""],
            ["… p99 (ms)", fmt_stat(fn["p99"]), "≤ 10,000"],
            ["… max (ms)", fmt_stat(fn["max"]), ""],
            ["vacancies whose first notice never arrived", fmt_stat(d["vacancies_without_notice"]), "0"],
            ["notices delivered per second", fmt_stat(d["notices_per_s"]), ""],
            ["big clinic (a third of the cancellations): first notice p50 / p99 (ms)",
             f"{fmt_stat(d['first_notice_ms_big']['p50'])} / {fmt_stat(d['first_notice_ms_big']['p99'])}", ""],
            ["49 small clinics: first notice p50 / p99 (ms)",
             f"{fmt_stat(d['first_notice_ms_small']['p50'])} / {fmt_stat(d['first_notice_ms_small']['p99'])}", ""],
            ["small clinics' p99 ÷ big clinic's p99", fmt_stat(d["small_p99_over_big_p99"]), "≤ 2"],
            ["claims (POST accept on the claim page) p50 / p99 (ms)",
             f"{fmt_stat(d['claim_ms']['p50'])} / {fmt_stat(d['claim_ms']['p99'])}", "p99 ≤ 200"],
            ["claims sent / errors", f"{fmt_stat(d['claims'])} / {fmt_stat(d['claim_errors'])}", "0 errors"],
            ["console waitlist page p50 / p99 (ms)",
             f"{fmt_stat(d['console_ms']['p50'])} / {fmt_stat(d['console_ms']['p99'])}", "p99 ≤ 500"],
            ["console errors", fmt_stat(d["console_errors"]), ""],
            ["cancellation answer p50 / p99 (ms)",
             f"{fmt_stat(d['cancel_ms']['p50'])} / {fmt_stat(d['cancel_ms']['p99'])}", ""],
            ["cancellation errors", fmt_stat(d["cancellation_errors"]), ""],
            ["seconds to send every cancellation", fmt_stat(d["cancel_send_seconds"]), f"{d['seconds']}"],
            [f"pgbench TPC-B-like tps (-c {PGBENCH_CLIENTS} -j 2, {d.get('pgbench_seconds', 15)} s, same run)",
             fmt_stat(d["pgbench_tps"]), ""],
            ["invariants (checker + per-run checks) after every run",
             "held" if d["invariants_ok_every_run"] else "**broken**", "held"],
        ],
    )
    cpu = d["cpu_ms_per_cancellation"]
    result.table(
        "CPU per cancellation (everything that followed it: dispatch, notice, claims, console loads, beat), ms",
        ["web (gunicorn)", "worker (Celery)", "beat", "receiver", "PostgreSQL backends", "all"],
        [[*(fmt_stat(cpu[k]) for k in ("web", "worker", "beat", "receiver", "postgresql") if k in cpu),
          fmt(sum(cpu[k]["median"] for k in cpu))]],
    )
    if d.get("load_generator_cpu_ms_per_cancellation"):
        result.note(
            f"The load generator (the benchmark's own process: cancellation senders, claimers, staff, the receiver "
            f"log's tail) used {fmt_stat(d['load_generator_cpu_ms_per_cancellation'])} ms of CPU per cancellation "
            "on the same cores, outside the system's figures above.")
    if d.get("machine_busy_share"):
        busy = d["machine_busy_share"]
        result.note(
            f"The whole machine (every process, from the first cancellation to the end of the drain, /proc/stat) was "
            f"busy {fmt(100 * busy['median'])} % of the time ({fmt(100 * busy['min'])}–{fmt(100 * busy['max'])} %): "
            "near 100 % the cores, not the loop's design, set the pace.")
    result.table(
        "Per run",
        ["run", "vacancies", "notices", "first notice p50 / p99 / max (ms)", "claims ok / sent", "offers ACCEPTED",
         "console loads", "pgbench tps", "CPU s (web / worker / beat / receiver / PostgreSQL)"],
        [[f"run {i + 1}", f"{r['vacancies']:,}", f"{r['notices']:,}",
          " / ".join(fmt(r["first_notice_ms"][k]) for k in ("p50", "p99", "max")),
          f"{r['claims_ok']} / {r['claims']}", f"{r['offers_accepted']:,}", f"{r['console_ms']['n']:,}",
          fmt(r["pgbench_tps"]),
          " / ".join(str(r["cpu_seconds"].get(k, "–")) for k in ("web", "worker", "beat", "receiver", "postgresql"))]
         for i, r in enumerate(d["runs"])],
    )
