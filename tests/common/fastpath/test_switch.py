"""``FASTPATHS=off`` (``settings.FASTPATHS = False``): every fast path takes the ORM's or Django's own road,
with the same answers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models.expressions import RawSQL
from django.test.utils import CaptureQueriesContext

from common.fastpath import PreparedQuery, Semaphore, enabled, prepared_cursor
from scheduling.models import Clinic


@pytest.fixture
def off(settings):
    settings.FASTPATHS = False


def _build(clinic_id, ref):
    return (Clinic.objects.select_related("tenant_group")
            .annotate(doubled=RawSQL("%s::bigint * 2", [clinic_id])).filter(ref=ref).order_by("pk")[:1])


def _prepared(marker: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", [f"%{marker}%"])
        return cursor.fetchone()[0]


def test_on_by_default(settings):
    del settings.FASTPATHS
    assert enabled()


def test_off_a_prepared_query_is_the_orms_queryset_with_the_same_instance(off, clinic):
    prepared: PreparedQuery[Clinic] = PreparedQuery(_build, int, str)
    with CaptureQueriesContext(connection) as sent:
        got = prepared.first(clinic.pk, clinic.ref)
    assert got is not None and got.pk == clinic.pk and got.doubled == clinic.pk * 2
    assert got.tenant_group.ref == clinic.tenant_group.ref and len(sent) == 1
    assert sent[0]["sql"].startswith("SELECT") and prepared._compiled == {}  # nothing compiled ahead
    assert prepared.first(clinic.pk, "cl_missing") is None
    assert _prepared('"doubled"') == 0


def test_off_prepared_cursor_is_djangos_own_and_prepares_nothing(off, clinic):
    with prepared_cursor(connection) as cursor:
        assert type(cursor) is type(connection.cursor())
        cursor.execute("SELECT ref FROM scheduling_clinic WHERE id = %s AND 'pin-off' <> ''", [clinic.pk])
        assert cursor.fetchone() == (clinic.ref,)
    assert _prepared("pin-off") == 0


def test_off_no_slot_is_taken_and_the_caller_works_without_one(off, db):
    semaphore = Semaphore("tests.switch", size=lambda: 2, wait_seconds=lambda: 5)
    with CaptureQueriesContext(connection) as sent, semaphore.held() as slot:
        assert slot is None
    assert len(sent) == 0


def test_off_the_throttles_ask_django_for_a_redis_client_each_time(off):
    from django.core.cache import cache

    from common.fastpath import redis_client

    first, second = redis_client(cache), redis_client(cache)
    assert first is not second and first.connection_pool is second.connection_pool


def test_on_the_throttles_keep_one_redis_client_per_pool(settings):
    from django.core.cache import cache

    from common.fastpath import redis_client

    settings.FASTPATHS = True
    assert redis_client(cache) is redis_client(cache)
