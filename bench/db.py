"""The bench database and bulk data builders.

Reference rows that the services validate (tenant group, clinic, practitioners, treatments, users,
roles, policy) are made through the project's own models and services; bulk rows (patients,
decisions, waitlist entries, jobs) are made with ``INSERT … SELECT generate_series`` or ``COPY`` in
one statement per table, respecting the models' constraints (the entry's generated columns are left
to PostgreSQL).
"""

from __future__ import annotations

from devtools import scratchdb

# Re-exported: the bench modules call them as ``db.…``.
from devtools.scratchdb import admin_dsn as admin_dsn
from devtools.scratchdb import db_name as db_name
from devtools.scratchdb import url_with_db as url_with_db

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/clinic_waitlist_bench"


def bench_url() -> str:
    return scratchdb.database_url("BENCH_DATABASE_URL", DEFAULT_URL)


def check_name(name: str) -> None:
    scratchdb.check_name(name, "bench")


def configure_environment() -> None:
    """Point Django at the bench database before ``django.setup()``."""
    # Bench clinics are made per run; a new tenant starts with the waitlist off, so turn it on for all.
    scratchdb.configure_environment(bench_url(), "bench", REDIS_URL="redis://127.0.0.1:6379/7",
                                    CACHE_KEY_PREFIX="cw-bench", LOG_LEVEL="WARNING",
                                    WAITLIST_ENABLED_BY_DEFAULT="true")


def recreate_database(url: str) -> None:
    scratchdb.recreate_database(url, "bench")


def forget_cached() -> None:
    """Delete the bench's cache keys (its ``CACHE_KEY_PREFIX``, ``cw-bench``), not the Redis database's others."""
    import redis
    from django.conf import settings

    cache = settings.CACHES["default"]
    client = redis.Redis.from_url(cache["LOCATION"])
    keys = list(client.scan_iter(match=f"{cache['KEY_PREFIX']}:*", count=1000))
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start:start + 1000])


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def sql(statement: str, params=None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def analyze(*tables: str) -> None:
    for table in tables:
        sql(f"VACUUM ANALYZE {table}")


# --- reference rows ----------------------------------------------------------------------------


def make_clinic(label: str, *, practitioners: int = 10, treatments: int = 1, timezone: str = "Asia/Seoul"):
    """A tenant group, a clinic and its practitioners and treatments (ORM, one row each)."""
    from scheduling.models import Clinic, Practitioner, TenantGroup, Treatment

    tenant = TenantGroup.objects.create(name=f"Bench tenant {label}")
    # No quiet hours: a benchmark runs at any hour of the clinic's day.
    clinic = Clinic.objects.create(tenant_group=tenant, name=f"Bench clinic {label}", timezone=timezone,
                                   settings={"quiet_hours": {}})
    docs = Practitioner.objects.bulk_create(
        [Practitioner(clinic=clinic, name=f"Dr. Bench {label}-{i}") for i in range(practitioners)]
    )
    treats = Treatment.objects.bulk_create(
        [Treatment(clinic=clinic, name=f"Treatment {label}-{i}", duration_minutes=30) for i in range(treatments)]
    )
    # The bulk_create'd refs come from RefField.pre_save; re-read to be sure they are set.
    clinic.bench_practitioners = list(Practitioner.objects.filter(pk__in=[d.pk for d in docs]).order_by("pk"))
    clinic.bench_treatments = list(Treatment.objects.filter(pk__in=[t.pk for t in treats]).order_by("pk"))
    return clinic


def bulk_patients(clinic, n: int, *, fingerprints: bool = False) -> tuple[int, int]:
    """``n`` patients of ``clinic`` in one statement; returns (first id, last id) (contiguous)."""
    rows = sql(
        """
        INSERT INTO scheduling_patient
            (ref, tenant_group_id, clinic_id, display_name, email, phone, language, crm_fingerprint, created_at)
        SELECT 'pt_b' || %(c)s || 'x' || g || 'x' || substr(md5(random()::text), 1, 8),
               %(tg)s, %(c)s, 'Bench Patient ' || g, 'bench' || g || '@patients.example', '', 'en',
               CASE WHEN %(fp)s THEN encode(sha256(('bench-crm-' || %(c)s || '-' || g)::bytea), 'hex') ELSE '' END,
               now()
        FROM generate_series(1, %(n)s) g
        RETURNING id
        """,
        {"c": clinic.pk, "tg": clinic.tenant_group_id, "n": n, "fp": fingerprints},
    )
    ids = sorted(r[0] for r in rows)
    # Contact consent (EMAIL, source IMPORT): the matcher passes over a patient without it.
    sql(
        """
        INSERT INTO scheduling_contactconsent
            (ref, clinic_id, patient_id, channel, state, source, actor, recorded_at, evidence)
        SELECT 'cns_b' || p.id || 'x' || substr(md5(random()::text), 1, 8), %(c)s, p.id, 'EMAIL', 'GRANTED', 'IMPORT',
               'system:bench', now(), ''
        FROM scheduling_patient p WHERE p.clinic_id = %(c)s AND p.id BETWEEN %(a)s AND %(b)s
        """,
        {"c": clinic.pk, "a": ids[0], "b": ids[-1]},
    )
    return ids[0], ids[-1]


def bulk_fresh_decisions(clinic, first_patient: int, last_patient: int) -> None:
    """One FRESH booking-reliability decision per patient, valid for a year."""
    sql(
        """
        INSERT INTO waitlist_bookingreliabilitydecision
            (ref, decision_ref, clinic_id, tenant_group_id, patient_id, status, priority_rank, expires_at, received_at)
        SELECT 'brd_b' || p.id || 'x' || substr(md5(random()::text), 1, 8), 'bench-dec-' || p.id,
               %(c)s, %(tg)s, p.id, 'FRESH', 0, now() + interval '365 days', now()
        FROM scheduling_patient p WHERE p.clinic_id = %(c)s AND p.id BETWEEN %(a)s AND %(b)s
        """,
        {"c": clinic.pk, "tg": clinic.tenant_group_id, "a": first_patient, "b": last_patient},
    )


def _availability_mix() -> dict[str, int]:
    from waitlist.joining.availability import ANY_TIME, DAYS, PARTS, mask_of

    return {"any_time": ANY_TIME, "weekdays": mask_of(DAYS[:5], PARTS), "mornings": mask_of(DAYS, ["MORNING"])}


#: Entries' availability (issue 40): 60 % any time, 20 % any part of a weekday, 20 % mornings of any day.
AVAILABILITY_MIX = _availability_mix()


def bulk_entries(
    clinic,
    n: int,
    *,
    patients: tuple[int, int],
    treatment_id: int,
    practitioner_ids: list[int],
    named_share: float = 0.3,
    window_days: float = 7,
    horizon_days: float = 60,
    wide: bool = False,
    seed: float = 0.42,
) -> None:
    """``n`` WAITING entries in one ``INSERT … SELECT generate_series``.

    ``named_share`` of them ask for one of ``practitioner_ids`` by name, the rest accept any; each
    window is ``window_days`` long, placed uniformly over the next ``horizon_days`` (``wide``: every
    window covers the whole horizon); priority ranks 0–3 (mostly 0); waiting since up to 180 days; availability
    ``AVAILABILITY_MIX``.
    Patients are reused round-robin over the given id range. With more entries than patients (the matcher
    and console read benchmarks at the issue's sizes) a patient gets several overlapping windows, which the
    schema refuses (``wl_entry_one_live_per_window``, one live entry per patient, treatment and window):
    that write-path guard is dropped from the bench database for those fixtures. The contention benchmark
    gives each patient one entry and keeps it, so its cost on dispatch is measured there.
    """
    first, last = patients
    if n > last - first + 1:
        sql("ALTER TABLE waitlist_waitlistentry DROP CONSTRAINT IF EXISTS wl_entry_one_live_per_window")
    sql("SELECT setseed(%s)", [seed])
    sql(
        """
        INSERT INTO waitlist_waitlistentry
            (ref, clinic_id, tenant_group_id, patient_id, treatment_id, practitioner_id, resource_kind,
             earliest, latest, priority_rank, waiting_since, status, version, suppressed_until,
             withdraw_reason, created_at, updated_at, availability)
        SELECT 'wle_b' || %(c)s || 'x' || g || 'x' || substr(md5(random()::text), 1, 6),
               %(c)s, %(tg)s, %(first)s + (g %% %(np)s), %(tr)s,
               CASE WHEN r.named < %(named)s THEN (%(docs)s::bigint[])[1 + (g %% %(ndocs)s)] END,
               '', r.earliest, r.earliest + make_interval(secs => %(window)s * 86400), r.rank,
               r.since, 'WAITING', 1, NULL, '', r.since, now(), r.availability
        FROM generate_series(1, %(n)s) g
        CROSS JOIN LATERAL (
            SELECT random() AS named,
                   CASE WHEN %(wide)s THEN date_trunc('day', now())
                        ELSE date_trunc('hour', now()) + interval '1 day'
                             + make_interval(secs => random() * (%(horizon)s - %(window)s) * 86400) END AS earliest,
                   CASE WHEN random() < 0.85 THEN 0 ELSE 1 + floor(random() * 3)::int END AS rank,
                   now() - make_interval(secs => random() * 180 * 86400) - make_interval(secs => g %% 1000)
                       AS since,
                   CASE WHEN random() < 0.6 THEN %(any_time)s WHEN random() < 0.5 THEN %(weekdays)s
                        ELSE %(mornings)s END AS availability
            WHERE g > 0
        ) r
        """,
        {
            "c": clinic.pk,
            "tg": clinic.tenant_group_id,
            "first": first,
            "np": last - first + 1,
            "tr": treatment_id,
            "named": named_share,
            "docs": practitioner_ids,
            "ndocs": len(practitioner_ids),
            "window": (horizon_days + 2) if wide else window_days,
            "horizon": horizon_days,
            "wide": wide,
            "n": n,
            **AVAILABILITY_MIX,
        },
    )


def staff_user(clinic, username: str, role: str = "STAFF"):
    """A user with a role at ``clinic`` (through scheduling's role service) and an API token."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from scheduling.models import Role
    from scheduling.services import clinic_grant_role

    user = get_user_model().objects.create_user(username=username, password="bench-password-1")
    clinic_grant_role(clinic=clinic, user=user, role=Role(role))
    token, _ = Token.objects.get_or_create(user=user)
    return user, token.key
