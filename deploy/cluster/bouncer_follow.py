"""Keeps a PgBouncer's idea of its PostgreSQL's role true: ``RECONNECT`` when the node is promoted or demoted.

PgBouncer (1.18, Debian 12's) caches the first server's startup parameters and hands them to every client
login, ``in_hot_standby`` included (pgbouncer/pgbouncer#859). libpq's ``target_session_attrs=read-write`` trusts
that parameter, so after a failover the PgBouncer in front of the promoted standby would still say "standby"
and every client would skip it. ``RECONNECT`` drops the cached parameters (and the server connections, each
once released); this process sends it whenever what PgBouncer tells a new client differs from what the node
tells one (``in_hot_standby``, ``default_transaction_read_only``). It runs beside
each PgBouncer, on the database host, and needs nothing from the monitor.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

PSQL = "/usr/lib/postgresql/15/bin/psql"
#: What libpq's target_session_attrs reads from a new session's startup parameters.
ROLE_PARAMETERS = ("in_hot_standby", "default_transaction_read_only")


def role_seen(port: int, dbname: str) -> tuple[str | None, ...] | None:
    """The role parameters a new session on ``port`` is told (None when it cannot connect)."""
    import psycopg

    try:
        with psycopg.connect(host="127.0.0.1", port=port, dbname=dbname, user="postgres", connect_timeout=2) as conn:
            return tuple(conn.info.parameter_status(name) for name in ROLE_PARAMETERS)
    except psycopg.Error:
        return None


def reconnect(bouncer_port: int) -> bool:
    done = subprocess.run([PSQL, "-h", "127.0.0.1", "-p", str(bouncer_port), "-U", "postgres", "-d", "pgbouncer",
                           "-Atqc", "RECONNECT"], capture_output=True, text=True, timeout=5)
    return done.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-port", type=int, required=True)
    parser.add_argument("--bouncer-port", type=int, required=True)
    parser.add_argument("--dbname", required=True)
    parser.add_argument("--every", type=float, default=0.5)
    args = parser.parse_args()
    # Compared, not remembered: pg_autoctl promotes first and turns default_transaction_read_only off a moment
    # later, so a RECONNECT at the first change can cache a half-way state; the next look corrects it.
    while True:
        truth = role_seen(args.node_port, args.dbname)
        served = role_seen(args.bouncer_port, args.dbname) if truth is not None else None
        if truth is not None and served is not None and served != truth and reconnect(args.bouncer_port):
            print(f"{time.strftime('%H:%M:%S')} node {args.node_port} says {truth}, PgBouncer {args.bouncer_port} "
                  f"said {served}: reconnected", flush=True)
        time.sleep(args.every)


if __name__ == "__main__":
    sys.exit(main())
