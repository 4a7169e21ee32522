"""Scale-out on one PostgreSQL: two web processes (gunicorn) and two Celery workers side by side.

Cancellations arrive on both web processes at once, the two workers dispatch the vacancies, then
every offer is claimed and booked twice at once (once per web process). Invariants: one offer per
vacancy, one claim and one booking per offer, one CONFIRMED appointment per hold, nothing doubled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager

import pytest
import requests
from django.conf import settings
from django.db import connection
from rest_framework.authtoken.models import Token

from observability.invariants import check
from scheduling.models import Appointment, AppointmentStatus, Role
from tests import factories as f
from tests.conftest import seoul
from tests.support.processes import wait_until
from tests.support.servers import free_port
from tests.worlds import waitlist_world
from waitlist import tasks
from waitlist.models import Offer, OfferStatus, Vacancy, VacancyStatus

SLOTS = 6


def _env() -> dict:
    db = connection.settings_dict
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_KEY_PREFIX": f"scaleout-{uuid.uuid4().hex[:8]}:",
        "CACHE_KEY_PREFIX": f"scaleout-{uuid.uuid4().hex[:8]}",
        "API_THROTTLE_USER": "100000/min",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "WARNING",
    }


@contextmanager
def process(args: list[str], env: dict):
    proc = subprocess.Popen([sys.executable, "-m", *args], cwd=settings.BASE_DIR, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def up(base: str) -> bool:
    try:
        return requests.get(f"{base}/healthz", timeout=5).status_code == 200
    except requests.RequestException:  # not listening yet, or the worker is still importing Django
        return False


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_web_and_two_worker_processes_keep_every_invariant(monkeypatch):
    monkeypatch.setattr(tasks.dispatch_vacancy, "delay", lambda vacancy_id: None)  # setup only: no broker
    world = waitlist_world()
    admin = f.user_with_role(world.clinic, Role.ADMIN)
    token = Token.objects.create(user=admin).key
    appointments = [world.confirmed(seoul(3 + i // 3, 9 + i % 3)) for i in range(SLOTS)]
    for _ in range(SLOTS + 2):
        world.waiting()

    env = _env()
    ports = [free_port(), free_port()]
    webs = [f"http://127.0.0.1:{port}" for port in ports]
    with ExitStack() as stack:
        for n, port in enumerate(ports):
            stack.enter_context(process(["gunicorn", "config.wsgi:application", "-b", f"127.0.0.1:{port}",
                                         "-w", "1", "--access-logfile", "-"], env))
            stack.enter_context(process(["celery", "-A", "config", "worker", "-P", "solo", "-n", f"w{n}@scaleout",
                                         "-Q", "maintenance,delivery,reevaluation", "--without-gossip",
                                         "--without-mingle", "--without-heartbeat"], env))
        for base in webs:
            wait_until(lambda base=base: up(base), f"{base} to answer", 120)
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"
        api = f"/api/v1/clinics/{world.clinic.ref}"

        def post(i: int, path: str, body: dict) -> int:
            headers = {"Idempotency-Key": uuid.uuid4().hex}
            return session.post(webs[i % 2] + api + path, json=body, headers=headers, timeout=60).status_code

        with ThreadPoolExecutor(max_workers=4) as pool:
            cancels = list(pool.map(lambda i: post(i, f"/appointments/{appointments[i].ref}/cancel",
                                                   {"reason": "scale-out"}), range(SLOTS)))
            assert cancels == [200] * SLOTS
            offered = Offer.objects.filter(clinic=world.clinic, status=OfferStatus.OFFERED)
            wait_until(lambda: offered.count() == SLOTS, "the workers to offer every vacancy", 120)
            # Each offer's notice goes out at once (the delivery run a dispatch queues), and recording it moves
            # the offer's version: read the versions a client would see after its notice, as a patient does.
            wait_until(lambda: offered.filter(notified_at__isnull=False).count() == SLOTS,
                       "the workers to deliver every offer's notice", 120)

            offers = list(offered.select_related("hold"))
            claims = list(pool.map(lambda job: post(job[0], f"/offers/{job[1].ref}/claim",
                                                    {"expected_version": job[1].version}),
                                   [(i, o) for o in offers for i in (0, 1)]))
            # The loser of each pair replays the winner's claim (200) or sees the version moved (409).
            assert set(claims) <= {200, 409} and claims.count(200) >= SLOTS, claims
            books = list(pool.map(lambda job: post(job[0], f"/holds/{job[1].hold.ref}/book", {}),
                                  [(i, o) for o in offers for i in (0, 1)]))
            assert all(code in (200, 201) for code in books), books

    report = check()
    assert report.ok, report.summary()
    assert Offer.objects.filter(clinic=world.clinic).count() == SLOTS  # one offer per vacancy, no more
    assert set(Vacancy.objects.filter(clinic=world.clinic).values_list("status", flat=True)) == {VacancyStatus.FILLED}
    booked = Appointment.objects.filter(clinic=world.clinic, status=AppointmentStatus.CONFIRMED)
    assert booked.count() == SLOTS  # SLOTS cancelled, SLOTS booked again: nothing doubled
    assert booked.filter(source_hold__isnull=False).count() == SLOTS
