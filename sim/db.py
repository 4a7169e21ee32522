"""The simulator's own database (``SIM_DATABASE_URL``, default ``clinic_waitlist_sim``), recreated per run."""

from __future__ import annotations

import os

from bench.db import admin_dsn, db_name

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/clinic_waitlist_sim"


def sim_url() -> str:
    return os.environ.get("SIM_DATABASE_URL", DEFAULT_URL)


def check_name(name: str) -> None:
    if name.startswith("cw_") or "sim" not in name:
        raise SystemExit(f"refusing to use database {name!r}: simulation databases must have 'sim' in their name")


def configure_environment() -> None:
    """Point Django at the simulation database before ``django.setup()``."""
    url = sim_url()
    check_name(db_name(url))
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/8")
    os.environ.setdefault("CACHE_KEY_PREFIX", "cw-sim")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def recreate_database() -> None:
    import psycopg

    url = sim_url()
    name = db_name(url)
    check_name(name)
    with psycopg.connect(admin_dsn(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
