"""Replica reads with pinning (common/replica.py): a console page may read the replica, except for the browser
that just wrote, which reads its own write from the primary.

The "replica" is a second connection to the test database holding a REPEATABLE READ snapshot taken before the
console action: a replica lagging behind by exactly that action, so reading it misses the write.
"""

from __future__ import annotations

import pytest
from django.db import connections
from django.urls import reverse

from common.replica import PIN_COOKIE, REPLICA_ALIAS
from tests.operations.waitlist_helpers import dead_delivery_offer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("frozen_clock", "no_broker")]


@pytest.fixture
def lagging_replica(settings, world):
    """The ``replica`` alias and the router on, its snapshot taken now (after the world, before the test acts)."""
    # A wrapper of its own, set on the handler but not in its settings (Django's test case then lets it connect).
    primary = connections["default"]
    connections[REPLICA_ALIAS] = primary.__class__(dict(primary.settings_dict), alias=REPLICA_ALIAS)
    settings.DATABASE_ROUTERS = ["common.replica.ReplicaRouter"]
    middleware = list(settings.MIDDLEWARE)
    middleware.insert(middleware.index("common.dbloss.DatabaseUnavailableMiddleware") + 1,
                      "common.replica.ReplicaReadsMiddleware")
    settings.MIDDLEWARE = middleware
    replica = connections[REPLICA_ALIAS]
    replica.set_autocommit(False)
    with replica.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute("SELECT count(*) FROM common_auditentry")
    yield replica
    replica.rollback()
    replica.set_autocommit(True)
    replica.close()
    del connections[REPLICA_ALIAS]


def withdraw(web, clinic, offer) -> None:
    response = web.post(
        reverse("console:waitlist-withdraw", kwargs={"clinic_ref": clinic.ref, "offer_ref": offer.ref}),
        {"reason": "patient asked by phone", "confirm": "on", "idempotency_key": "wd-replica"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200, response.content


def audit_page(web, clinic) -> str:
    response = web.get(reverse("console:audit", kwargs={"clinic_ref": clinic.ref}))
    assert response.status_code == 200
    return response.content.decode()


def test_the_browser_that_withdrew_an_offer_reads_its_withdrawal_on_the_next_page(admin_web, world, lagging_replica):
    offer = dead_delivery_offer(world)
    withdraw(admin_web, world.clinic, offer)
    assert PIN_COOKIE in admin_web.cookies
    assert "waitlist.offer_withdraw" in audit_page(admin_web, world.clinic)


def test_a_browser_that_did_not_write_reads_the_replica(admin_web, admin, world, lagging_replica):
    from tests.operations.conftest import signed_in

    offer = dead_delivery_offer(world)
    withdraw(admin_web, world.clinic, offer)
    other_browser = signed_in(admin)
    assert "waitlist.offer_withdraw" not in audit_page(other_browser, world.clinic)


def test_the_pin_ends_after_the_lag_bound(admin_web, world, lagging_replica, settings):
    offer = dead_delivery_offer(world)
    settings.REPLICA_PIN_SECONDS = -1  # an expired pin: the cookie no longer sends reads to the primary
    withdraw(admin_web, world.clinic, offer)
    assert "waitlist.offer_withdraw" not in audit_page(admin_web, world.clinic)
