"""A worker killed mid-dispatch: its task runs again, exactly once in effect (issue 26 part 3).

Real Celery workers (subprocesses) on the real Redis (this checkout's ``REDIS_URL`` db, a private key
prefix and queue). The dispatch is held mid-task by a row lock the test keeps on the vacancy (promotion
waits for it), so the kill lands while the message is delivered and not acknowledged. Then:

- the pool process dies → the worker puts the message back at once (``task_reject_on_worker_lost``) and
  runs it again in a new pool process, with a visibility timeout of 10 minutes so nothing else could;
- the whole worker dies → a restarted worker restores the unacknowledged message once it is older than
  the visibility timeout (3 s here) and runs it.

Either way the vacancy ends with one offer and every invariant holds. Nothing sleeps: each step waits,
bounded, for the state the other process makes true.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from contextlib import contextmanager

import psutil
import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection

from common.models import OutboxMessage
from observability.invariants import check
from observability.models import Heartbeat, ProcessRole
from tests.support.faults import admin_dsn, kill_connection
from tests.support.processes import wait_until
from tests.waitlist.loop_helpers import open_vacancy
from tests.worlds import waitlist_world
from waitlist import tasks
from waitlist.models import EntryStatus, Offer, OfferStatus

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def _env(prefix: str, visibility: int) -> dict:
    db = connection.settings_dict
    env = {**os.environ}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.update({
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": settings.REDIS_URL,
        "CELERY_BROKER_KEY_PREFIX": prefix,
        "CACHE_KEY_PREFIX": prefix,
        "CELERY_VISIBILITY_TIMEOUT_SECONDS": str(visibility),
        "CELERY_UNACKED_RESTORE_INTERVAL_SECONDS": "0.5",
        "CELERY_TASK_TIME_LIMIT": "120",
        "WAITLIST_DISPATCH_CONCURRENCY": "0",
        "WORKER_HEARTBEAT_SECONDS": "1",
        "LOG_LEVEL": "WARNING",
    })
    return env


@contextmanager
def worker(env: dict, queue: str, name: str):
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-P", "prefork", "-c", "1", "-Q", queue,
         "-n", f"{name}@kill", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=settings.BASE_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def _send(env: dict, queue: str, vacancy_id: int) -> None:
    subprocess.run([sys.executable, "-m", "celery", "-A", "config", "call", "waitlist.tasks.dispatch_vacancy",
                    "--args", f"[{vacancy_id}]", "--queue", queue],
                   cwd=settings.BASE_DIR, env=env, check=True, capture_output=True)


def _lock_waiters(admin: psycopg.Connection) -> set[int]:
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchall()
    return {row[0] for row in rows}


@pytest.fixture
def scene(monkeypatch):
    monkeypatch.setattr(tasks.dispatch_vacancy, "delay", lambda vacancy_id: None)  # setup only
    world = waitlist_world()
    entry = world.waiting(world.patient())
    vacancy = open_vacancy(world)
    prefix = f"kill-{uuid.uuid4().hex[:8]}:"
    yield world, entry, vacancy, prefix
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)


@contextmanager
def vacancy_locked(vacancy_id: int):
    with psycopg.connect(admin_dsn()) as holder:
        holder.execute("SELECT 1 FROM waitlist_vacancy WHERE id = %s FOR UPDATE", [vacancy_id])
        try:
            yield holder
        finally:
            holder.rollback()


def _unacked(prefix: str) -> int:
    return redis.Redis.from_url(settings.REDIS_URL).hlen(f"{prefix}unacked")


def _offered_once(vacancy, entry) -> None:
    wait_until(lambda: Offer.objects.filter(vacancy=vacancy).exists(), "the rerun to offer the vacancy", 90)
    offers = list(Offer.objects.filter(vacancy=vacancy))
    assert [(o.status, o.entry_id) for o in offers] == [(OfferStatus.OFFERED, entry.pk)]
    entry.refresh_from_db()
    assert entry.status == EntryStatus.OFFERED
    assert OutboxMessage.objects.filter(aggregate_ref=offers[0].ref).count() == 1
    report = check()
    assert report.ok, report.summary()


def test_a_pool_process_killed_mid_dispatch_has_its_task_run_again_at_once(scene):
    world, entry, vacancy, prefix = scene
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    env = _env(prefix, visibility=600)  # the visibility timeout cannot be what brings it back
    with psycopg.connect(admin_dsn(), autocommit=True) as admin, worker(env, queue, "a") as main:
        with vacancy_locked(vacancy.pk):
            _send(env, queue, vacancy.pk)
            wait_until(lambda: _lock_waiters(admin), "the dispatch to wait on the vacancy lock", 90)
            (first,) = _lock_waiters(admin)
            (child,) = psutil.Process(main.pid).children()
            child.kill()
            # The worker puts the message back and a new pool process starts the same dispatch again.
            wait_until(lambda: _lock_waiters(admin) - {first}, "the task to run again in a new pool process", 60)
            kill_connection(first)  # the dead process's connection (a dead host's would time out)
            assert main.poll() is None
        _offered_once(vacancy, entry)
        wait_until(lambda: _unacked(prefix) == 0, "the rerun to be acknowledged", 30)
    assert Heartbeat.objects.filter(role=ProcessRole.WORKER, name="a@kill").exists()


def test_a_worker_killed_mid_dispatch_has_its_task_restored_to_the_restarted_worker(scene):
    world, entry, vacancy, prefix = scene
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    env = _env(prefix, visibility=3)
    with psycopg.connect(admin_dsn(), autocommit=True) as admin:
        with vacancy_locked(vacancy.pk), worker(env, queue, "b") as doomed:
            _send(env, queue, vacancy.pk)
            wait_until(lambda: _lock_waiters(admin), "the dispatch to wait on the vacancy lock", 90)
            (held,) = _lock_waiters(admin)
            os.killpg(doomed.pid, signal.SIGKILL)  # the whole worker: main and pool processes
            doomed.wait(timeout=30)
            kill_connection(held)
            assert _unacked(prefix) == 1  # delivered, never acknowledged
        assert not Offer.objects.filter(vacancy=vacancy).exists()
        with worker(env, queue, "c"):
            _offered_once(vacancy, entry)
            wait_until(lambda: _unacked(prefix) == 0, "the restored task to be acknowledged", 30)
