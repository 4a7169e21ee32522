"""The simulator's databases (``SIM_DATABASE_URL``, default ``clinic_waitlist_sim``).

``SIM_DATABASE_URL`` names a *template*: the migrated schema, built once and kept while the migrations
do not change (its fingerprint, a hash of every migration file and the Django version, is its
PostgreSQL comment). Each run gets its own copy (``CREATE DATABASE … TEMPLATE``, a fraction of a
second) and drops it when done, so every run starts from the same empty database whatever ran before
it or beside it (reconcile and the outbox span a database, so parallel runs must not share one).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from devtools import scratchdb
from devtools.scratchdb import admin_dsn, db_name, url_with_db

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/clinic_waitlist_sim"
MARKER = "sim"


def sim_url() -> str:
    return scratchdb.database_url("SIM_DATABASE_URL", DEFAULT_URL)


def check_name(name: str) -> None:
    scratchdb.check_name(name, MARKER)


def configure_environment(url: str | None = None) -> None:
    """Point Django at the simulation database (``url``, default the template) before ``django.setup()``."""
    scratchdb.configure_environment(url or sim_url(), MARKER, REDIS_URL="redis://127.0.0.1:6379/8",
                                    CACHE_KEY_PREFIX="cw-sim", LOG_LEVEL="ERROR")


def schema_fingerprint() -> str:
    """A hash of every migration file Django would apply (all apps) and of the Django version."""
    import django
    from django.db.migrations.loader import MigrationLoader

    digest = hashlib.sha256(django.get_version().encode())
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for key, migration in sorted(loader.disk_migrations.items()):
        digest.update(repr(key).encode())
        source = getattr(sys.modules.get(migration.__module__), "__file__", None)
        digest.update(Path(source).read_bytes() if source else b"?")
    return f"sim-template {digest.hexdigest()}"


def _comment(conn, name: str) -> str | None:
    row = conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                       [name]).fetchone()
    return None if row is None else row[0]


def prepare_template(rebuild: bool = False) -> bool:
    """Make sure the template holds the current migrated schema; returns whether it had to migrate.

    Runs in a process whose Django points at the template (``configure_environment()``); closes that
    connection afterwards (PostgreSQL copies a template only while nobody is connected to it)."""
    import psycopg
    from django.core.management import call_command
    from django.db import connections

    url = sim_url()
    name = db_name(url)
    check_name(name)
    fingerprint = schema_fingerprint()
    with psycopg.connect(admin_dsn(url), autocommit=True) as conn:
        _drop_run_databases(conn, name)
        if not rebuild and _comment(conn, name) == fingerprint:
            return False
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        call_command("migrate", verbosity=0, interactive=False)
    finally:
        connections.close_all()
    with psycopg.connect(admin_dsn(url), autocommit=True) as conn:
        # Set last: a template whose migrate failed half-way has no fingerprint and is rebuilt next time.
        conn.execute(f'COMMENT ON DATABASE "{name}" IS ' + "'" + fingerprint + "'")
    return True


def _drop_run_databases(conn, template: str) -> None:
    """Copies left by an interrupted run (and the per-worker copies of earlier versions)."""
    pattern = template.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "\\_%"
    for (name,) in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [pattern]).fetchall():
        check_name(name)
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_url(label: str) -> str:
    return url_with_db(sim_url(), f"{db_name(sim_url())}_{label}")


def create_run_database(url: str) -> None:
    """A copy of the template for one run. A throwaway database: commits need not wait for the disk."""
    scratchdb.recreate_database(url, MARKER, template=db_name(sim_url()))
    import psycopg

    with psycopg.connect(admin_dsn(url), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{db_name(url)}" SET synchronous_commit = off')


def drop_run_database(url: str) -> None:
    scratchdb.drop_database(url, MARKER)


def use_database(url: str) -> None:
    """Point this process's Django connection at ``url`` (same server, another database)."""
    from django.conf import settings
    from django.db import connections

    check_name(db_name(url))
    connection = connections["default"]
    connection.close()
    connection.settings_dict["NAME"] = settings.DATABASES["default"]["NAME"] = db_name(url)
    os.environ["DATABASE_URL"] = url


def backend_cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a PostgreSQL backend when the server runs on this machine and is readable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
