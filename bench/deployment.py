"""The shape ``make run`` deploys, started on loopback for a benchmark: gunicorn (``config.wsgi``, 2 workers ×
4 threads), one Celery worker (queues delivery, reevaluation and maintenance, concurrency 2) and Celery
beat (``observability.beat:RecordingScheduler``), with the arguments ``config/launcher.py`` gives them,
against the bench database and the bench Redis. Each child runs in its own session so it (and its pool)
is stopped by process group; their output goes to log files under a temporary folder.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from .harness import ROOT, log

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass
class Deployment:
    env: dict
    port: int
    logs: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, *, receiver: list[str] | None = None) -> None:
        bin_dir = Path(sys.executable).parent
        commands = {
            # config/launcher.py's arguments (the access log off: a benchmark's lines would only cost CPU).
            "web": [str(bin_dir / "gunicorn"), "config.wsgi", "--bind", f"{HOST}:{self.port}", "--workers", "2",
                    "--threads", "4", "--graceful-timeout", "5",
                    "--logger-class", "config.gunicorn_logging.RedactingLogger"],
            "worker": [str(bin_dir / "celery"), "-A", "config", "worker", "-Q", "delivery,reevaluation,maintenance",
                       "--concurrency", "2", "--loglevel", "WARNING", "-n", f"bench-{self.port}@%h"],
            "beat": [str(bin_dir / "celery"), "-A", "config", "beat", "--loglevel", "WARNING",
                     "--schedule", str(self.logs / "celerybeat-schedule")],
        }
        if receiver:
            commands = {"receiver": receiver, **commands}
        for name, cmd in commands.items():
            out = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
            self.processes[name] = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                                    start_new_session=True)
        self._wait_web()
        self._wait_worker(bin_dir)

    def _wait_web(self, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            self._check_alive()
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=2)
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"gunicorn did not answer; see {self.logs}/web.log")

    def _wait_worker(self, bin_dir: Path, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            self._check_alive()
            ping = subprocess.run([str(bin_dir / "celery"), "-A", "config", "inspect", "ping", "--timeout", "2",
                                   "-d", f"bench-{self.port}@{socket.gethostname()}"],
                                  cwd=ROOT, env=self.env, capture_output=True, text=True)
            if ping.returncode == 0:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Celery worker did not answer; see {self.logs}/worker.log")

    def _check_alive(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.logs}/{name}.log")

    def cpu_seconds(self) -> dict[str, float]:
        """User + system CPU seconds of each child and its descendants still running (from /proc)."""
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for name, proc in self.processes.items():
            total = 0.0
            for pid in _group_pids(proc.pid):
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    total += (int(fields[11]) + int(fields[12])) / tick
                except (OSError, IndexError, ValueError):
                    continue
            out[name] = total
        return out

    def stop(self) -> None:
        for proc in reversed(list(self.processes.values())):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.processes.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        self.processes.clear()


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                pids.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def deployment(extra_env: dict[str, str] | None = None) -> Deployment:
    """A stopped deployment on a free port with the bench environment (start it with ``start``)."""
    port = free_port()
    logs = Path(tempfile.mkdtemp(prefix="cw-bench-deploy-"))
    env = dict(os.environ)
    env.update({
        "DATABASE_CONN_MAX_AGE": "300",  # as devtools/launcher.py gives web and worker
        "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL") or os.environ["REDIS_URL"],
        "PUBLIC_BASE_URL": f"http://{HOST}:{port}",
        "DJANGO_ALLOWED_HOSTS": f"{HOST},localhost",
        "PYTHONWARNINGS": "ignore",
    })
    env.update(extra_env or {})
    log(f"deployment on {HOST}:{port}, logs in {logs}")
    return Deployment(env=env, port=port, logs=logs)
