"""Throwaway PostgreSQL databases for the benchmarks (``bench/``) and the simulator (``sim/``).

Both point Django at a database of their own, named by an environment variable, that they may drop
and recreate at will; the name must carry the tool's marker ("bench", "sim") so a typo can never
drop the shared dev database or a test database. Not part of the product (not installed).
"""

from __future__ import annotations

import os
from urllib.parse import urlparse, urlunparse

PROTECTED = ("clinic_waitlist",)  # never touch the shared dev database (or cw_* test databases)


def database_url(variable: str, default: str) -> str:
    """``variable`` from the environment, or from the checkout's ``.env`` (never overriding the environment),
    or ``default``: a worktree's ``.env`` keeps its benches and simulations off other checkouts' databases."""
    from pathlib import Path

    import environ

    environ.Env.read_env(Path(__file__).resolve().parent.parent / ".env", overwrite=False)
    return os.environ.get(variable, default)


def url_with_db(url: str, name: str) -> str:
    parts = urlparse(url)
    return urlunparse(parts._replace(path="/" + name))


def db_name(url: str) -> str:
    return urlparse(url).path.lstrip("/")


def admin_dsn(url: str) -> str:
    return url_with_db(url, "postgres")


def check_name(name: str, marker: str) -> None:
    if name in PROTECTED or name.startswith("cw_") or marker not in name:
        raise SystemExit(f"refusing to use database {name!r}: {marker} databases must have '{marker}' in their name")


def configure_environment(url: str, marker: str, **defaults: str) -> None:
    """Point Django at ``url`` before ``django.setup()``; ``defaults`` (``REDIS_URL``, ``LOG_LEVEL``…) apply
    unless the environment sets them."""
    check_name(db_name(url), marker)
    os.environ["DATABASE_URL"] = url
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")


def recreate_database(url: str, marker: str, *, template: str | None = None) -> None:
    """Drop ``url``'s database (closing its connections) and create it empty, or as a copy of ``template``."""
    import psycopg

    name = db_name(url)
    check_name(name, marker)
    with psycopg.connect(admin_dsn(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


def drop_database(url: str, marker: str) -> None:
    import psycopg

    name = db_name(url)
    check_name(name, marker)
    with psycopg.connect(admin_dsn(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
