"""Replica reads with pinning and a lag bound (common/replica.py): a console page may read the replica, except for
the browser that just wrote, which reads its own write from the primary, and except while the replica is further
behind than ``REPLICA_MAX_LAG_SECONDS`` or does not answer.

The "replica" is a second connection to the test database holding a REPEATABLE READ snapshot taken before the
console action: a replica lagging behind by exactly that action, so reading it misses the write. That server is
not in recovery, so it reports no lag of its own; the lag-bound tests have it report a replay position instead
(``stuck_replica``): the one thing a test database cannot be is a standby.
"""

from __future__ import annotations

import logging

import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from django.urls import reverse

from common import queries
from common.replica import PIN_COOKIE, REPLICA_ALIAS, lag, replica_dependency
from tests.operations.conftest import signed_in
from tests.operations.waitlist_helpers import dead_delivery_offer
from tests.support.servers import free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("frozen_clock", "no_broker")]


def replica_reads_on(settings, **overrides):
    """The ``replica`` alias (a wrapper of its own, set on the handler but not in its settings: Django's test case
    then lets it connect), the router and the middleware on; the lag known to this process forgotten."""
    primary = connections["default"]
    connections[REPLICA_ALIAS] = primary.__class__({**primary.settings_dict, **overrides}, alias=REPLICA_ALIAS)
    settings.DATABASE_ROUTERS = ["common.replica.ReplicaRouter"]
    middleware = list(settings.MIDDLEWARE)
    middleware.insert(middleware.index("common.dbloss.DatabaseUnavailableMiddleware") + 1,
                      "common.replica.ReplicaReadsMiddleware")
    settings.MIDDLEWARE = middleware
    settings.REPLICA_MAX_LAG_SECONDS = settings.REPLICA_PIN_SECONDS = 5
    settings.REPLICA_LAG_CHECK_SECONDS = 1.0
    lag.reset()
    return connections[REPLICA_ALIAS]


@pytest.fixture
def lagging_replica(settings, world):
    """The replica, its snapshot taken now (after the world, before the test acts)."""
    replica = replica_reads_on(settings)
    replica.set_autocommit(False)
    with replica.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute("SELECT count(*) FROM common_auditentry")
    yield replica
    replica.rollback()
    replica.set_autocommit(True)
    replica.close()
    del connections[REPLICA_ALIAS]
    lag.reset()


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
    offer = dead_delivery_offer(world)
    withdraw(admin_web, world.clinic, offer)
    other_browser = signed_in(admin)
    assert "waitlist.offer_withdraw" not in audit_page(other_browser, world.clinic)


def test_the_pin_ends_after_the_lag_bound(admin_web, world, lagging_replica, frozen_clock):
    offer = dead_delivery_offer(world)
    withdraw(admin_web, world.clinic, offer)
    frozen_clock.shift(6)  # past REPLICA_PIN_SECONDS (5): the cookie no longer sends reads to the primary
    assert "waitlist.offer_withdraw" not in audit_page(admin_web, world.clinic)


def test_the_pin_lasts_at_least_the_lag_bound(admin_web, world, lagging_replica, settings, frozen_clock):
    """A pin shorter than the lag bound would let a browser read a replica that has not replayed its write."""
    settings.REPLICA_PIN_SECONDS, settings.REPLICA_MAX_LAG_SECONDS = 1, 5
    withdraw(admin_web, world.clinic, dead_delivery_offer(world))
    frozen_clock.shift(4)
    assert "waitlist.offer_withdraw" in audit_page(admin_web, world.clinic)


@pytest.fixture
def stuck_replica(lagging_replica, monkeypatch):
    """The replica as a standby reports it: in recovery, replayed up to ``position["replayed"]`` (None: up to
    wherever the primary is now, i.e. caught up)."""
    position: dict[str, int | None] = {"replayed": None}

    def wal_replayed(alias):
        assert alias == REPLICA_ALIAS
        replayed = position["replayed"]
        return True, queries.wal_written(DEFAULT_DB_ALIAS) if replayed is None else replayed

    monkeypatch.setattr(queries, "wal_replayed", wal_replayed)
    return position


def test_a_replica_further_behind_than_the_lag_bound_is_not_read(admin_web, admin, world, stuck_replica,
                                                                  frozen_clock):
    other_browser = signed_in(admin)
    offer = dead_delivery_offer(world)
    assert "waitlist.offer_withdraw" not in audit_page(other_browser, world.clinic)  # caught up: read
    stuck_replica["replayed"] = queries.wal_written(DEFAULT_DB_ALIAS)  # and it stops replaying here
    withdraw(admin_web, world.clinic, offer)
    frozen_clock.shift(4)  # behind by 4 s at most: within REPLICA_MAX_LAG_SECONDS (5), still read
    assert "waitlist.offer_withdraw" not in audit_page(other_browser, world.clinic)
    frozen_clock.shift(2)  # 6 s behind: past the bound, the primary serves the page
    assert "waitlist.offer_withdraw" in audit_page(other_browser, world.clinic)
    stuck_replica["replayed"] = None  # it replays again: read again once a sample finds it caught up
    frozen_clock.shift(1)
    assert "waitlist.offer_withdraw" not in audit_page(other_browser, world.clinic)


def test_a_replica_never_seen_caught_up_is_not_read(admin, world, stuck_replica):
    stuck_replica["replayed"] = 0  # in recovery, nothing replayed yet
    withdraw(signed_in(admin), world.clinic, dead_delivery_offer(world))
    assert "waitlist.offer_withdraw" in audit_page(signed_in(admin), world.clinic)


@pytest.fixture
def dead_replica(settings, world, caplog):
    """The ``replica`` alias pointing at a port where nothing listens, its outage not yet logged (another test in
    this process may have left the replica marked down)."""
    replica_dependency.down = False
    replica_reads_on(settings, PORT=str(free_port()), OPTIONS={
        **connections["default"].settings_dict.get("OPTIONS", {}), "connect_timeout": 2})
    yield
    connections[REPLICA_ALIAS].close()
    del connections[REPLICA_ALIAS]
    lag.reset()
    replica_dependency.down = False


def test_a_replica_that_does_not_answer_is_not_read_and_logged_once(admin_web, admin, world, dead_replica, caplog,
                                                                    frozen_clock):
    logger = logging.getLogger("common.degrade")  # counted by this handler only (another test may configure it)
    saved = logger.disabled, logger.propagate, logger.level
    logger.disabled, logger.propagate = False, False
    logger.setLevel(logging.WARNING)
    logger.addHandler(caplog.handler)  # before the first request: any of them may be the first to try the replica
    try:
        withdraw(admin_web, world.clinic, dead_delivery_offer(world))
        other_browser = signed_in(admin)
        for _ in range(3):
            assert "waitlist.offer_withdraw" in audit_page(other_browser, world.clinic)
            frozen_clock.shift(6)  # each time a new try of the replica
    finally:
        logger.removeHandler(caplog.handler)
        logger.disabled, logger.propagate, level = saved
        logger.setLevel(level)
    lines = [r.getMessage() for r in caplog.records if r.name == "common.degrade"]
    state = {"down": replica_dependency.down, "as_of": lag.as_of, "checked_at": lag._checked_at, "level": saved[2]}
    assert len([m for m in lines if m.startswith("database replica unavailable")]) == 1, (lines, state)


def test_a_page_whose_replica_went_away_mid_request_is_replayed_on_the_primary(admin_web, admin, world,
                                                                               lagging_replica):
    other_browser = signed_in(admin)
    audit_page(other_browser, world.clinic)  # the replica is known to be current for the next second
    withdraw(admin_web, world.clinic, dead_delivery_offer(world))
    lagging_replica.rollback()
    lagging_replica.close()
    lagging_replica.settings_dict["PORT"] = str(free_port())  # its host is gone: the read fails, then the replay
    assert "waitlist.offer_withdraw" in audit_page(other_browser, world.clinic)  # (common/dbloss.py) reads the primary
    lagging_replica.settings_dict["PORT"] = connections["default"].settings_dict["PORT"]
    lagging_replica.connect()
    lagging_replica.set_autocommit(False)


def test_the_wal_positions_of_a_primary(db):
    assert queries.wal_written(DEFAULT_DB_ALIAS) > 0
    assert queries.wal_replayed(DEFAULT_DB_ALIAS) == (False, None)
