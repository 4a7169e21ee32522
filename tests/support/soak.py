"""``make soak``: mixed load on loopback for SOAK_MINUTES with the invariant checker every minute.

A scratch database, a private Redis and gunicorn (which also serves the CRM stub) on loopback. One
driver mixes HTTP commands with STAFF and ADMIN tokens (patients, decisions, waitlist entries,
bookings, cancellations, dispatch, claim + book, decline, signed CRM events, redrive preview and
execute) with the background loop run in-process (offer expiry, reconcile, reevaluation dispatch and
worker, outbox delivery). Every minute, and at the end, ``observability.invariants.check()`` runs. The run
fails (exit 1) on any 5xx, any unexpected exception, or any invariant violation. CI runs 2 minutes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
import traceback
import uuid
from collections import Counter
from datetime import timedelta

import requests

STAFF_ACTIONS = {
    "patient": 3,
    "cancel": 4,
    "dispatch": 4,
    "claim": 3,
    "decline": 2,
    "expire": 1,
    "event": 2,
    "redrive": 1,
    "deliver": 2,
}


class Driver:
    def __init__(self, base_url: str, world: dict, rng: random.Random):
        self.base = base_url
        self.world = world
        self.rng = rng
        self.clinic = world["clinic"]
        self.statuses: Counter = Counter()
        self.actions: Counter = Counter()
        self.errors: list[str] = []
        self.server_errors: list[str] = []
        self.patients: list[str] = []
        self.vacancies: list[str] = []
        self.offers: list[str] = []
        self.revision = int(time.time())
        self.sessions = {}
        for role, token in {**world["tokens"], "FEED": world["feed_token"]}.items():
            session = requests.Session()
            session.headers["Authorization"] = f"Token {token}"
            self.sessions[role] = session
        self.catalog = {
            name: [row["ref"] for row in self.call("GET", f"clinics/{self.clinic}/{name}/").json()]
            for name in ("practitioners", "treatments")
        }

    # -- HTTP -----------------------------------------------------------------------------------
    def call(self, method: str, path: str, body: dict | None = None, *, role: str = "STAFF", raw: bytes = b"",
             headers: dict | None = None) -> requests.Response:
        url = f"{self.base}/api/v1/{path}"
        extra = dict(headers or {})
        if method == "POST":
            extra.setdefault("Idempotency-Key", uuid.uuid4().hex)
        if raw:
            response = requests.post(url, data=raw, headers={**extra, "Content-Type": "application/json"}, timeout=60)
        else:
            response = self.sessions[role].request(method, url, json=body, headers=extra, timeout=60)
        self.statuses[response.status_code] += 1
        if response.status_code >= 500:
            self.server_errors.append(f"{method} {path} -> {response.status_code}")
        return response

    # -- actions --------------------------------------------------------------------------------
    def patient(self):
        now = time.time()
        response = self.call("POST", f"clinics/{self.clinic}/patients/", {
            "display_name": f"Soak {uuid.uuid4().hex[:6]}", "language": self.rng.choice(["en", "ko"]),
            "contact_consent": ["EMAIL", "SMS"]})
        if response.status_code != 201:
            return
        ref = response.json()["ref"]
        self.patients.append(ref)
        expires = _iso(now + 6 * 86400)
        self.call("POST", f"clinics/{self.clinic}/booking-decisions/", {
            "patient": ref, "decision_ref": f"soak-{uuid.uuid4().hex[:8]}", "status": "FRESH", "expires_at": expires},
            role="FEED")
        self.call("POST", f"clinics/{self.clinic}/waitlist-entries/", {
            "patient": ref, "treatment": self.catalog["treatments"][0],
            "earliest": _iso(now), "latest": _iso(now + 40 * 86400)})

    def cancel(self):
        if not self.patients:
            return self.patient()
        day = int(time.time() // 86400) + self.rng.randint(2, 35)
        starts = day * 86400 + self.rng.randint(0, 32) * 900  # a quarter-hour in the first 8 h (UTC) of the day
        response = self.call("POST", f"clinics/{self.clinic}/appointments/", {
            "patient": self.rng.choice(self.patients), "practitioner": self.rng.choice(self.catalog["practitioners"]),
            "treatment": self.catalog["treatments"][0], "starts_at": _iso(starts), "status": "CONFIRMED"})
        if response.status_code != 201:
            return
        cancelled = self.call("POST", f"clinics/{self.clinic}/appointments/{response.json()['ref']}/cancel",
                              {"reason": "soak cancellation"})
        if cancelled.status_code == 200 and cancelled.json().get("vacancy"):
            self.vacancies.append(cancelled.json()["vacancy"])

    def dispatch(self):
        if not self.vacancies:
            return self.cancel()
        ref = self.rng.choice(self.vacancies)
        response = self.call("POST", f"clinics/{self.clinic}/vacancies/{ref}/dispatch")
        if response.status_code == 200 and response.json().get("offer"):
            self.offers.append(response.json()["offer"])
            self.vacancies.remove(ref)

    def _take_offer(self) -> str | None:
        if not self.offers:
            self.dispatch()
            return None
        return self.offers.pop(self.rng.randrange(len(self.offers)))

    def claim(self):
        ref = self._take_offer()
        if ref is None:
            return
        offer = self.call("GET", f"clinics/{self.clinic}/offers/{ref}")
        if offer.status_code != 200:
            return
        claimed = self.call("POST", f"clinics/{self.clinic}/offers/{ref}/claim",
                            {"expected_version": offer.json()["version"]})
        if claimed.status_code == 200:
            self.call("POST", f"clinics/{self.clinic}/holds/{claimed.json()['hold']}/book")

    def decline(self):
        ref = self._take_offer()
        if ref is not None:
            self.call("POST", f"clinics/{self.clinic}/offers/{ref}/decline", {"reason": "soak"}, role="ADMIN")

    def expire(self):
        from django.utils import timezone

        from waitlist.services import offers_expire_due

        offers_expire_due(now=timezone.now() + timedelta(days=2))  # as if the hold window had passed

    def event(self):
        from reevaluation.assessment import document_hash
        from reevaluation.crm_stub import stub_document
        from reevaluation.intake.services import signed_headers

        self.revision += 1
        crm_ref = f"crm-{self.clinic}-{self.rng.randint(0, 5)}"
        ref = f"asm-soak-{self.revision}"
        body = json.dumps({
            "eventId": f"soak-{uuid.uuid4().hex}", "tenantGroupId": self.world["tenant"], "clinicId": self.clinic,
            "patientReferenceFingerprint": _sha256(crm_ref), "profileRevision": self.revision,
            "materialChange": self.rng.random() < 0.7, "assessmentRef": ref,
            "assessmentHash": document_hash(stub_document(assessment_ref=ref, revision=self.revision)),
            "occurredAt": _iso(time.time()),
        }).encode()
        self.call("POST", "events/patient-scheduling-assessment-changed", raw=body, headers=signed_headers(body))

    def redrive(self):
        preview = self.call("POST", "ops/profile-reevaluation", {
            "clinic": self.clinic, "action": "PREVIEW", "reason": "soak redrive", "limit": 5}, role="ADMIN")
        if preview.status_code == 200 and preview.json().get("count"):
            self.call("POST", "ops/profile-reevaluation", {
                "clinic": self.clinic, "action": "EXECUTE", "reason": "soak redrive",
                "preview": preview.json()["preview"]}, role="ADMIN")

    def deliver(self):
        from common.outbox import outbox_deliver_due
        from reevaluation.jobs.worker import job_run
        from reevaluation.services import dispatch_round
        from waitlist.services import reconcile_run

        for claim in dispatch_round():
            job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt)
        reconcile_run()
        outbox_deliver_due(worker="soak", limit=100)

    def step(self) -> None:
        names = list(STAFF_ACTIONS)
        name = self.rng.choices(names, weights=[STAFF_ACTIONS[n] for n in names])[0]
        self.actions[name] += 1
        try:
            getattr(self, name)()
        except Exception as exc:  # noqa: BLE001 - counted and reported; the run fails on any
            from common.errors import DomainError

            if isinstance(exc, DomainError):
                return
            self.errors.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            traceback.print_exc()


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def main() -> int:
    from tests.support.fuzz import seed_world
    from tests.support.processes import gunicorn, redis_server, scratch_database

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup (server, database) on TERM
    minutes = float(os.environ.get("SOAK_MINUTES", "30"))
    rng = random.Random(int(os.environ.get("SOAK_SEED", "1")))
    with scratch_database("soak") as database_url, redis_server() as redis:
        env = {
            "DATABASE_URL": database_url, "REDIS_URL": redis.url, "CELERY_BROKER_URL": redis.url,
            "API_THROTTLE_ANON": "1000000/min", "API_THROTTLE_USER": "1000000/min", "CRM_STUB_ENABLED": "true",
            # The load runs at whatever hour CI starts it: no quiet hours, so the waitlist loop always offers.
            "WAITLIST_NEW_CLINIC_QUIET_HOURS": "",
        }
        os.environ.update(env)
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
        django.setup()
        from observability.invariants import check
        from scheduling.models import Clinic

        world = seed_world()
        world["tenant"] = Clinic.objects.select_related("tenant_group").get(ref=world["clinic"]).tenant_group.ref
        with gunicorn(env, workers=2, error_log=f"/tmp/soak-{os.getpid()}-server.log") as base_url:
            os.environ["CRM_BASE_URL"] = f"{base_url}/crm-stub"
            from django.conf import settings

            settings.CRM_BASE_URL = os.environ["CRM_BASE_URL"]
            driver = Driver(base_url, world, rng)
            started = time.monotonic()
            next_check, checks, violations = started + 60, 0, {}
            while time.monotonic() - started < minutes * 60:
                driver.step()
                if time.monotonic() >= next_check:
                    report = check()
                    checks += 1
                    violations.update(report.failed())
                    print(f"soak {(time.monotonic() - started) / 60:5.1f} min: {sum(driver.statuses.values())} "
                          f"requests {dict(sorted(driver.statuses.items()))}; {report.summary()}", flush=True)
                    next_check += 60
            driver.deliver()
            report = check()
            checks += 1
            violations.update(report.failed())
    total = sum(driver.statuses.values())
    print(f"soak: {minutes:g} min, {total} requests {dict(sorted(driver.statuses.items()))}, "
          f"actions {dict(driver.actions)}")
    print(f"soak: {checks} invariant checks, final {report.summary()}")
    print(f"soak: {len(driver.server_errors)} 5xx, {len(driver.errors)} unexpected errors, "
          f"violations {violations or 'none'}")
    for line in (driver.server_errors + driver.errors)[:30]:
        print("  -", line)
    # A soak that made no offer exercised neither claims nor declines nor expiry: that is a failure too.
    exercised = report.totals.get("offers", 0) > 0
    if not exercised:
        print("soak: no offer was made: the load did not reach the waitlist loop")
    ok = not driver.server_errors and not driver.errors and not violations and total > 0 and exercised
    print("soak:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
