"""Each xdist worker's test database, cloned from a migrated template instead of migrated afresh.

pytest-django migrates one test database per worker (``test_<name>_gw0``, ``_gw1``): every migration,
every run. Here the first worker that needs it migrates ``tpl_<name>_<hash>`` once, and every worker
then gets its own database with ``CREATE DATABASE ... TEMPLATE``, a file copy inside PostgreSQL.

Why it is safe to keep the template between runs: ``<hash>`` covers the text of every installed
app's migration files and the Django version, so a changed, added or removed migration names a new
template (older ones of the same ``<name>`` are dropped). Nothing else is kept: the worker databases
are dropped and cloned afresh each run, and the template is never connected to after migrating. A
fresh clone of the repository needs nothing to exist: the template is made when it is missing.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path

import django
import psycopg
from django.apps import apps
from django.core.management import call_command
from django.db import connections

#: pg_advisory_lock key: one process at a time makes the template (the other waits, then clones).
LOCK_KEY = 0x7E57DB  # with hashtext(<name>): one lock per configured database


def migrations_hash() -> str:
    """A digest of every installed app's migration files (names and text) and the Django version."""
    digest = hashlib.sha256(django.get_version().encode())
    for config in sorted(apps.get_app_configs(), key=lambda c: c.label):
        folder = Path(config.path) / "migrations"
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else ():
            digest.update(f"{config.label}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _admin(connection) -> psycopg.Connection:
    """An autocommit connection to the ``postgres`` maintenance database of the same server."""
    params = connection.get_connection_params()
    params = {key: value for key, value in params.items() if key not in ("cursor_factory", "context")}
    params["dbname"] = "postgres"
    return psycopg.connect(**params, autocommit=True)


def _exists(admin: psycopg.Connection, name: str) -> bool:
    return admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def _migrate_into(connection, name: str) -> None:
    """Run every migration into database ``name`` through ``connection``, then point it back."""
    settings_dict = connection.settings_dict
    saved = settings_dict["NAME"]
    connection.close()
    settings_dict["NAME"] = name
    try:
        call_command("migrate", verbosity=0, interactive=False, run_syncdb=True, database=connection.alias)
    finally:
        connection.close()
        settings_dict["NAME"] = saved


def clone_test_database(alias: str = "default") -> str:
    """Drop and re-create this worker's test database as a copy of the migrated template; its name."""
    connection = connections[alias]
    test_name = connection.creation._get_test_db_name()
    base = connection.settings_dict["NAME"]
    prefix = f"tpl_{base}"[:50]
    template = f"{prefix}_{migrations_hash()}"
    with _admin(connection) as admin:
        admin.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [LOCK_KEY, base])
        try:
            if not _exists(admin, template):
                admin.execute(f'CREATE DATABASE "{template}"')
                try:
                    _migrate_into(connection, template)
                except BaseException:
                    admin.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
                    raise
                others = admin.execute(
                    "SELECT datname FROM pg_database WHERE left(datname, %s) = %s AND datname <> %s",
                    [len(prefix) + 1, prefix + "_", template],
                ).fetchall()
                for (old,) in others:  # an older migration set's template
                    admin.execute(f'DROP DATABASE IF EXISTS "{old}"')
            admin.execute(f'DROP DATABASE IF EXISTS "{test_name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{test_name}" TEMPLATE "{template}"')
            # Commits need not wait for the WAL flush: a test database lives for one run, and no test
            # crashes the shared server (faults end backends, which loses nothing committed). What
            # a concurrent session sees, and when, is unchanged.
            admin.execute(f'ALTER DATABASE "{test_name}" SET synchronous_commit = off')
        finally:
            admin.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [LOCK_KEY, base])
    return test_name


def drop_test_database(alias: str, old_name: str) -> None:
    """Drop this worker's clone even if a live-server thread still holds a connection to it, and point
    the connection back at ``old_name`` (what ``teardown_databases`` would do, minus its refusal)."""
    from django.conf import settings

    connection = connections[alias]
    test_name = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = old_name
    settings.DATABASES[alias]["NAME"] = old_name
    with _admin(connection) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{test_name}" WITH (FORCE)')


@contextmanager
def cloned_databases(*, verbosity: int, aliases, serialized_aliases):
    """pytest-django's ``setup_databases``/``teardown_databases``, on a cloned database (keepdb)."""
    from django.test.utils import setup_databases

    from tests.support import fastflush

    for alias in aliases:
        clone_test_database(alias)
    # keepdb: Django finds the clone and only runs ``migrate``, which has nothing left to apply.
    config = setup_databases(
        verbosity=verbosity, interactive=False, aliases=aliases, serialized_aliases=serialized_aliases, keepdb=True
    )
    for alias in aliases:
        fastflush.remember_static(alias)
    fastflush.install()
    try:
        yield
    finally:
        for connection, old_name, _destroy in config:
            drop_test_database(connection.alias, old_name)
