"""`make cluster` / `make cluster-down`: the highly available shape on one machine, every part its own process on
loopback (docs/deployment.md "The cluster").

- PostgreSQL: pg_auto_failover (Debian's ``postgresql-15-auto-failover``): a monitor and two data nodes, the
  standby synchronous (``synchronous_standby_names`` is set by the monitor: a commit returns once the standby
  has it). Each node runs under its keeper (``pg_autoctl run``), as on its own host.
- PgBouncer (Debian's ``pgbouncer``) beside each node, as on each database host: the transaction-mode database
  for web and the ``_session`` alias for workers. The service lists both PgBouncers in one libpq multi-host URL
  with ``target_session_attrs=read-write``: libpq skips the one in front of the standby or a dead node.
- Redis: a master, a replica and three Sentinels (Debian's ``redis-sentinel``); the broker and the cache reach
  the master through the Sentinels (``sentinel://`` and ``REDIS_SENTINEL_MASTER``).
- The service: two gunicorn web processes, two Celery workers and beat, with the environment in
  ``<dir>/service.env``.

Everything lives under ``CLUSTER_DIR`` (default ``.data/cluster``); ``down`` stops every process it started (by
the pid files there) and keeps the data; ``down --wipe`` removes it. Ports are in ``PORTS``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
CLUSTER_DIR = Path(os.environ.get("CLUSTER_DIR", BASE_DIR / ".data" / "cluster")).resolve()
HOST = "127.0.0.1"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
DB_NAME = os.environ.get("CLUSTER_DB_NAME", "cw_cluster")
MASTER_NAME = "cw"
PORTS = {
    "monitor": 55430, "node_a": 55431, "node_b": 55432,
    "bouncer_a": 56431, "bouncer_b": 56432,
    "redis_a": 56379, "redis_b": 56380, "sentinel_1": 56381, "sentinel_2": 56382, "sentinel_3": 56383,
    "web_1": 58001, "web_2": 58002,
}
NODES = ("node_a", "node_b")
SENTINELS = ("sentinel_1", "sentinel_2", "sentinel_3")
APT_PACKAGES = {
    "/usr/bin/pg_autoctl": "postgresql-15-auto-failover",
    "/usr/sbin/pgbouncer": "pgbouncer",
    "/usr/bin/redis-sentinel": "redis-sentinel",
    "/usr/bin/redis-server": "redis-server",
}
#: The monitor decides faster than its defaults (20 s unhealthy, checks every 5 s): about 10 s from a node's
#: loss to the standby's promotion. pg_auto_failover's GUCs, in milliseconds.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 500,
    "pgautofailover.node_considered_unhealthy_timeout": 6000,
    "pgautofailover.primary_demote_timeout": 10000,
}


def say(text: str) -> None:
    print(f"cluster: {text}", flush=True)


# --- processes -------------------------------------------------------------------------------------------


def pid_file(name: str) -> Path:
    return CLUSTER_DIR / "pids" / f"{name}.pid"


def running(name: str) -> int | None:
    path = pid_file(name)
    if not path.exists():
        return None
    pid = int(path.read_text().strip() or 0)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, ValueError):
        return None
    return pid


def spawn(name: str, args: list[str], *, env: dict | None = None, as_postgres: bool = False,
          cwd: Path | None = None) -> int:
    """Start ``args`` in its own session, output to ``logs/<name>.log``; its pid in ``pids/<name>.pid``."""
    if pid := running(name):
        return pid
    log = open(CLUSTER_DIR / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
    extra = {"user": "postgres", "group": "postgres", "extra_groups": []} if as_postgres and os.geteuid() == 0 else {}
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            cwd=cwd or CLUSTER_DIR, start_new_session=True, **extra)
    pid_file(name).write_text(str(proc.pid))
    return proc.pid


#: The service's processes run as systemd runs them (deploy/systemd: Restart=always): one that exits is started
#: again after a second. A Celery worker can exit on a broker failover (kombu's Redis transport raises while it
#: closes a channel whose connection is gone: "Unrecoverable error: AttributeError … 'hostname'").
SUPERVISE = ["/bin/sh", "-c", 'while :; do "$@"; echo "exited with $?; starting again in 1 s"; sleep 1; done',
             "supervise"]


def stop(name: str, *, timeout: float = 20) -> None:
    """SIGTERM to the process group started for ``name``, SIGKILL after ``timeout``."""
    pid = running(name)
    if pid is None:
        pid_file(name).unlink(missing_ok=True)
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running(name):
        time.sleep(0.2)
    if running(name):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pid_file(name).unlink(missing_ok=True)


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.5)
    raise SystemExit(f"cluster: {what} did not come up within {timeout:g} s (see {CLUSTER_DIR}/logs/)")


def ensure_packages() -> None:
    missing = sorted({pkg for path, pkg in APT_PACKAGES.items() if not Path(path).exists()})
    if missing:
        say(f"installing {' '.join(missing)} with apt")
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


# --- PostgreSQL: pg_auto_failover ------------------------------------------------------------------------


def autoctl_env() -> dict:
    xdg = CLUSTER_DIR / "xdg"
    return {
        "PATH": f"{PG_BIN}:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(CLUSTER_DIR),
        "XDG_CONFIG_HOME": str(xdg / "config"), "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_RUNTIME_DIR": str(xdg / "run"), "PG_CONFIG": str(PG_BIN / "pg_config"), "LANG": "C.UTF-8",
    }


def autoctl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    extra = {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}
    return subprocess.run(["pg_autoctl", *args], env=autoctl_env(), cwd=CLUSTER_DIR, check=check,
                          capture_output=True, text=True, **extra)


def monitor_uri() -> str:
    return f"postgres://autoctl_node@{HOST}:{PORTS['monitor']}/pg_auto_failover?sslmode=disable"


def psql(port: int, sql: str, *, db: str = "postgres") -> str:
    done = subprocess.run([str(PG_BIN / "psql"), "-h", HOST, "-p", str(port), "-U", "postgres", "-d", db,
                           "-Atqc", sql], capture_output=True, text=True, timeout=10)
    if done.returncode:
        raise RuntimeError(done.stderr.strip())
    return done.stdout.strip()


def node_states() -> dict[str, tuple[str, str]]:
    """{node name: (reported state, goal state)} from the monitor."""
    rows = psql(PORTS["monitor"], "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node",
                db="pg_auto_failover")
    return {name: (reported, goal) for name, reported, goal in (row.split("|") for row in rows.splitlines() if row)}


def primary_node() -> str | None:
    for name, (reported, goal) in node_states().items():
        if reported in ("primary", "wait_primary", "single") and goal == reported:
            return name
    return None


def start_monitor() -> None:
    pgdata = CLUSTER_DIR / "pg" / "monitor"
    if not (pgdata / "PG_VERSION").exists():
        say("creating the pg_auto_failover monitor")
        autoctl("create", "monitor", "--pgdata", str(pgdata), "--pgport", str(PORTS["monitor"]),
                "--hostname", HOST, "--auth", "trust", "--no-ssl", "--pgctl", str(PG_BIN / "pg_ctl"))
    if running("monitor") is None:
        # `create monitor` has no --listen and keeps '*' (passed to postgres as -h): loopback only, as everything here.
        autoctl("config", "set", "--pgdata", str(pgdata), "postgresql.listen_addresses", HOST)
    spawn("monitor", ["pg_autoctl", "run", "--pgdata", str(pgdata)], env=autoctl_env(), as_postgres=True)
    wait_for(lambda: psql(PORTS["monitor"], "SELECT 1", db="pg_auto_failover") == "1", 60, "the monitor")
    for name, value in MONITOR_SETTINGS.items():
        psql(PORTS["monitor"], f"ALTER SYSTEM SET {name} = {value}")
    psql(PORTS["monitor"], "SELECT pg_reload_conf()")


def start_node(name: str) -> None:
    pgdata = CLUSTER_DIR / "pg" / name
    if not (pgdata / "PG_VERSION").exists():
        say(f"creating PostgreSQL node {name} (port {PORTS[name]})")
        autoctl("create", "postgres", "--pgdata", str(pgdata), "--pgport", str(PORTS[name]), "--hostname", HOST,
                "--name", name, "--monitor", monitor_uri(), "--auth", "trust", "--no-ssl", "--dbname", DB_NAME,
                "--pgctl", str(PG_BIN / "pg_ctl"), "--replication-quorum", "true", "--candidate-priority", "50",
                "--listen", HOST)
    spawn(name, ["pg_autoctl", "run", "--pgdata", str(pgdata)], env=autoctl_env(), as_postgres=True)


def wait_for_pair(timeout: float = 180) -> None:
    def settled() -> bool:
        states = node_states()
        wanted = {"primary", "secondary"}
        return len(states) == 2 and {r for r, g in states.values() if r == g} == wanted
    wait_for(settled, timeout, "the primary and its synchronous standby")


# --- PgBouncer -------------------------------------------------------------------------------------------


def bouncer_ini(bouncer: str, node: str) -> Path:
    folder = CLUSTER_DIR / "pgbouncer"
    folder.mkdir(exist_ok=True)
    users = folder / "userlist.txt"
    users.write_text('"postgres" ""\n')
    ini = folder / f"{bouncer}.ini"
    target = f"host={HOST} port={PORTS[node]} dbname={DB_NAME}"
    # As deploy/pgbouncer/pgbouncer.ini, on loopback with trust; fast to give up on a dead server, so a
    # client waiting on it gets an error (and libpq the next host) instead of a hang.
    ini.write_text(
        "[databases]\n"
        f"{DB_NAME} = {target}\n"
        f"{DB_NAME}_session = {target} pool_mode=session\n"
        "[pgbouncer]\n"
        f"listen_addr = {HOST}\nlisten_port = {PORTS[bouncer]}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {users}\nadmin_users = postgres\n"
        "pool_mode = transaction\ndefault_pool_size = 10\nreserve_pool_size = 2\nmax_client_conn = 400\n"
        "server_reset_query = DISCARD ALL\nserver_check_query = select 1\n"
        "server_connect_timeout = 2\nserver_login_retry = 1\nquery_wait_timeout = 10\n"
        f"pidfile =\nlogfile =\n"
    )
    os.chown(folder, *_postgres_ids())
    return ini


def _postgres_ids() -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam("postgres")
    return entry.pw_uid, entry.pw_gid


def start_bouncer(bouncer: str, node: str) -> None:
    ini = bouncer_ini(bouncer, node)
    spawn(bouncer, ["/usr/sbin/pgbouncer", str(ini)], as_postgres=True)
    # RECONNECT on every promotion or demotion of the node (deploy/cluster/bouncer_follow.py says why).
    spawn(f"follow_{bouncer}", [sys.executable, str(Path(__file__).with_name("bouncer_follow.py")),
                                "--node-port", str(PORTS[node]), "--bouncer-port", str(PORTS[bouncer]),
                                "--dbname", DB_NAME])


# --- Redis and Sentinel ----------------------------------------------------------------------------------


def redis_conf(name: str, replica_of: str | None) -> Path:
    folder = CLUSTER_DIR / "redis" / name
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "redis.conf"
    if not conf.exists():  # Sentinel rewrites replicaof after a failover: keep what it wrote
        lines = [f"bind {HOST}", f"port {PORTS[name]}", f"dir {folder}", "save 60 1", "appendonly yes",
                 "appendfsync everysec", "protected-mode yes", "loglevel notice"]
        if replica_of:
            lines.append(f"replicaof {HOST} {PORTS[replica_of]}")
        conf.write_text("\n".join(lines) + "\n")
    return conf


def sentinel_conf(name: str) -> Path:
    folder = CLUSTER_DIR / "redis" / name
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "sentinel.conf"
    if not conf.exists():  # Sentinel keeps its state (current master, epochs) in this file
        conf.write_text(
            f"bind {HOST}\nport {PORTS[name]}\ndir {folder}\n"
            f"sentinel monitor {MASTER_NAME} {HOST} {PORTS['redis_a']} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} 3000\n"
            f"sentinel failover-timeout {MASTER_NAME} 15000\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
    return conf


def redis_ping(port: int) -> bool:
    done = subprocess.run(["redis-cli", "-h", HOST, "-p", str(port), "ping"], capture_output=True, text=True,
                          timeout=5)
    return done.stdout.strip() == "PONG"


def redis_master() -> tuple[str, int] | None:
    for name in SENTINELS:
        done = subprocess.run(["redis-cli", "-h", HOST, "-p", str(PORTS[name]), "sentinel",
                               "get-master-addr-by-name", MASTER_NAME], capture_output=True, text=True, timeout=5)
        parts = done.stdout.split()
        if len(parts) == 2:
            return parts[0], int(parts[1])
    return None


def start_redis() -> None:
    spawn("redis_a", ["redis-server", str(redis_conf("redis_a", None))])
    spawn("redis_b", ["redis-server", str(redis_conf("redis_b", "redis_a"))])
    for name in ("redis_a", "redis_b"):
        wait_for(lambda port=PORTS[name]: redis_ping(port), 30, name)
    for name in SENTINELS:
        spawn(name, ["redis-sentinel", str(sentinel_conf(name))])
    wait_for(lambda: redis_master() is not None, 30, "the Sentinels")


# --- the service -----------------------------------------------------------------------------------------


def database_url(database: str, ports: tuple[str, ...] = ("bouncer_a", "bouncer_b"), attrs: str = "read-write") -> str:
    hosts = ",".join(f"{HOST}:{PORTS[p]}" for p in ports)
    return f"postgres://postgres@{hosts}/{database}?target_session_attrs={attrs}&connect_timeout=2"


def redis_url() -> str:
    return ";".join(f"sentinel://{HOST}:{PORTS[name]}/0" for name in SENTINELS)


def service_env() -> dict[str, str]:
    """The environment every process of the service shares (written to ``service.env`` for other shells)."""
    return {
        "DJANGO_SETTINGS_MODULE": "config.settings.local",  # a demo on loopback: the CRM stub, demo users
        "DATABASE_URL": database_url(DB_NAME),
        "DATABASE_DIRECT_URL": database_url(DB_NAME, NODES),
        "DATABASE_POOLER_TRANSACTION_MODE": "true",
        "DATABASE_CONN_MAX_AGE": "300",
        # Replica reads (common/replica.py): the standby when there is one, else the primary.
        "REPLICA_DATABASE_URL": database_url(DB_NAME, attrs="prefer-standby"),
        "REDIS_URL": redis_url(),
        "CELERY_BROKER_URL": redis_url(),
        "REDIS_SENTINEL_MASTER": MASTER_NAME,
        "PUBLIC_BASE_URL": f"http://{HOST}:{PORTS['web_1']}",
        "CRM_BASE_URL": f"http://{HOST}:{PORTS['web_1']}/crm-stub",
        "CRM_STUB_ENABLED": "true",
        "DJANGO_ALLOWED_HOSTS": f"{HOST},localhost",
        "API_THROTTLE_ANON": "1000000/min", "API_THROTTLE_USER": "1000000/min",
        "WAITLIST_NEW_CLINIC_QUIET_HOURS": "",
        # The drill's clinics (deploy/cluster/drill.py) are new tenants: their waitlist on from the start.
        "WAITLIST_ENABLED_BY_DEFAULT": "true",
        # A dispatch whose task failed while PostgreSQL failed over is redone by reconcile: every 20 s here (60 s
        # by default) bounds how long such a vacancy waits for its offer.
        "WAITLIST_RECONCILE_EVERY_SECONDS": "20",
        "CACHE_KEY_PREFIX": "cwc",
        "LOG_LEVEL": "WARNING",
        "PROMETHEUS_MULTIPROC_DIR": str(CLUSTER_DIR / "prometheus"),
    }


def worker_env(env: dict) -> dict:
    """Workers: PgBouncer's session alias (dispatch slots and prepared statements), as docs/deployment.md says."""
    return {**env, "DATABASE_URL": database_url(f"{DB_NAME}_session"), "DATABASE_POOLER_TRANSACTION_MODE": "false"}


def manage(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env={**os.environ, **env}, check=True)


def start_service() -> None:
    env = service_env()
    (CLUSTER_DIR / "service.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    prom = CLUSTER_DIR / "prometheus"
    shutil.rmtree(prom, ignore_errors=True)
    prom.mkdir()
    say("migrating (straight to the primary, not through PgBouncer)")
    manage({**env, "DATABASE_URL": env["DATABASE_DIRECT_URL"]}, "migrate", "--no-input", "-v", "0")
    manage(env, "collectstatic", "--no-input", "-v", "0")
    bin_dir = Path(sys.executable).parent
    full = {**os.environ, **env}
    for web in ("web_1", "web_2"):
        spawn(web, [*SUPERVISE, str(bin_dir / "gunicorn"), "config.wsgi", "--bind", f"{HOST}:{PORTS[web]}",
                    "--workers", "2", "--threads", "4", "--timeout", "30", "--graceful-timeout", "5",
                    "--logger-class", "config.gunicorn_logging.RedactingLogger"], env=full, cwd=BASE_DIR)
    for worker in ("worker_1", "worker_2"):
        spawn(worker, [*SUPERVISE, str(bin_dir / "celery"), "-A", "config", "worker",
                       "-Q", "delivery,reevaluation,maintenance", "-n", f"{worker}@%h", "--concurrency", "2",
                       "--prefetch-multiplier", "1",
                       "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
              env={**os.environ, **worker_env(env)}, cwd=BASE_DIR)
    spawn("beat", [*SUPERVISE, str(bin_dir / "celery"), "-A", "config", "beat", "--loglevel", "WARNING",
                   "--schedule", str(CLUSTER_DIR / "celerybeat-schedule")], env=full, cwd=BASE_DIR)
    import urllib.request

    for web in ("web_1", "web_2"):
        url = f"http://{HOST}:{PORTS[web]}/healthz"
        wait_for(lambda url=url: urllib.request.urlopen(url, timeout=2).status == 200, 60, web)


SERVICE = ("beat", "worker_1", "worker_2", "web_1", "web_2")


def up() -> None:
    ensure_packages()
    for sub in ("pids", "logs", "pg", "xdg/config", "xdg/data", "xdg/run"):
        (CLUSTER_DIR / sub).mkdir(parents=True, exist_ok=True)
    uid, gid = _postgres_ids()
    for path in (CLUSTER_DIR, CLUSTER_DIR / "pg", CLUSTER_DIR / "xdg", *(CLUSTER_DIR / "xdg").iterdir()):
        os.chown(path, uid, gid)
    for log in (CLUSTER_DIR / "logs").iterdir():
        os.chown(log, uid, gid)
    start_monitor()
    start_node("node_a")
    wait_for(lambda: primary_node() is not None, 120, "the first node")
    start_node("node_b")
    wait_for_pair()
    primary = primary_node()
    say(f"PostgreSQL: {primary} primary, synchronous_standby_names = "
        f"{psql(PORTS[primary], 'SHOW synchronous_standby_names')!r}")
    for bouncer, node in (("bouncer_a", "node_a"), ("bouncer_b", "node_b")):
        start_bouncer(bouncer, node)
    start_redis()
    say(f"Redis: master {redis_master()} behind Sentinels {[PORTS[s] for s in SENTINELS]}")
    start_service()
    say(f"up: web on {PORTS['web_1']} and {PORTS['web_2']}; environment in {CLUSTER_DIR / 'service.env'}")


def down(wipe: bool) -> None:
    for name in SERVICE:
        stop(name)
    for name in (*SENTINELS, "redis_b", "redis_a", "follow_bouncer_a", "follow_bouncer_b", "bouncer_a", "bouncer_b"):
        stop(name, timeout=10)
    for name in (*NODES, "monitor"):
        # The keeper stops its PostgreSQL on SIGTERM (a fast shutdown).
        stop(name, timeout=30)
    if wipe:
        shutil.rmtree(CLUSTER_DIR, ignore_errors=True)
    say("down" + (" (data removed)" if wipe else f" (data kept in {CLUSTER_DIR})"))


def status() -> dict:
    names = ("monitor", *NODES, "bouncer_a", "bouncer_b", "follow_bouncer_a", "follow_bouncer_b", "redis_a", "redis_b",
             *SENTINELS, *SERVICE)
    report: dict = {"processes": {name: running(name) for name in names}}
    try:
        report["postgres"] = node_states()
    except Exception as exc:  # noqa: BLE001 - the monitor may be down: say so
        report["postgres"] = f"monitor unreachable: {exc}"
    try:
        report["redis_master"] = redis_master()
    except Exception as exc:  # noqa: BLE001
        report["redis_master"] = f"sentinels unreachable: {exc}"
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--wipe", action="store_true", help="down: remove the data too")
    args = parser.parse_args()
    if args.command == "up":
        up()
    elif args.command == "down":
        down(args.wipe)
    else:
        print(json.dumps(status(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
