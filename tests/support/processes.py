"""Real loopback processes for fuzz, fault and soak runs: a throwaway Redis, a scratch database, gunicorn.

Nothing here touches shared servers beyond one scratch database per run on the configured
PostgreSQL (created, then dropped); Redis is always a private ``redis-server`` on a free port.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import requests

BASE_DIR = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(check, what: str, timeout: float = 30.0, interval: float = 0.1) -> None:
    """Wait for a condition another process makes true (a port answering, rows written).

    A separate process offers nothing to wait on, so ``check`` is polled; an exception counts as
    "not yet". Nothing here waits for time to pass: the condition decides, the timeout only bounds it.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        pause.wait(interval)
    raise RuntimeError(f"{what} did not happen within {timeout:.0f}s")


class RedisServer:
    """A private ``redis-server`` on a free loopback port that a test can stop and start again (``extra``: more
    of its command-line options, e.g. ``--replicaof``)."""

    def __init__(self, *extra: str):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="redis-fault-")
        self.extra = list(extra)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", self.dir, *self.extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close() is None, "redis")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None


@contextmanager
def redis_server(*extra: str):
    server = RedisServer(*extra)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


@contextmanager
def redis_sentinel(master: RedisServer, name: str, *, down_after_ms: int = 500):
    """A Redis Sentinel (``redis-server --sentinel``) on a free loopback port watching ``master`` as ``name``
    (quorum 1), up once it knows the master's replicas; yields its port."""
    import redis

    port = free_port()
    folder = tempfile.mkdtemp(prefix="redis-sentinel-")
    conf = Path(folder) / "sentinel.conf"  # Sentinel rewrites it: its own file, never shared
    conf.write_text(f"bind 127.0.0.1\nport {port}\ndir {folder}\n"
                    f"sentinel monitor {name} 127.0.0.1 {master.port} 1\n"
                    f"sentinel down-after-milliseconds {name} {down_after_ms}\n"
                    f"sentinel failover-timeout {name} 10000\n")
    process = subprocess.Popen(["redis-server", str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        wait_until(lambda: client.sentinel_slaves(name), "the Sentinel learning the master's replicas")
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def base_database_url() -> str:
    """The configured DATABASE_URL (environment, then the worktree's .env), as settings would read it."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    env_file = BASE_DIR / ".env"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            if line.startswith("DATABASE_URL="):
                return line.split("=", 1)[1].strip()
    return "postgres://postgres@127.0.0.1:5432/clinic_waitlist"


def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextmanager
def scratch_database(suffix: str):
    """A fresh, migrated database ``<configured name>_<suffix>``; dropped afterwards. Yields its URL."""
    base = base_database_url()
    name = f"{urlsplit(base).path.lstrip('/') or 'clinic_waitlist'}_{suffix}"
    admin = _with_db(base, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_db(base, name)
    try:
        manage({"DATABASE_URL": url}, "migrate", "--noinput", "-v", "0")
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def child_env(extra: dict) -> dict:
    env = os.environ.copy()
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    env.pop("PYTEST_XDIST_WORKER", None)
    env.update(extra)
    return env


def manage(extra_env: dict, *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=child_env(extra_env), check=True)


@contextmanager
def gunicorn(extra_env: dict, *, workers: int = 2, access_log: str | None = None, error_log: str | None = None,
             threads: int = 1):
    """gunicorn serving config.wsgi on a free loopback port; yields its base URL (``threads`` > 1: the gthread
    worker of ``make run``, with keep-alive)."""
    port = free_port()
    args = [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{port}", "-w", str(workers),
            "--timeout", "60", "--graceful-timeout", "5", "--threads", str(threads)]
    if access_log:
        args += ["--access-logfile", access_log, "--access-logformat", '%(m)s %(s)s "%(U)s"']
    log = open(error_log, "ab") if error_log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    process = subprocess.Popen(args, cwd=BASE_DIR, env=child_env(extra_env), stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(f"{base}/api/schema/", timeout=5).status_code == 200, "gunicorn", 60)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if error_log:
            log.close()
