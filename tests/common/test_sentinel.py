"""Redis behind Sentinel (common/sentinel.py, docs/deployment.md "The cluster"), on real processes: a master, its
replica and a Sentinel on loopback. The cache (and the throttles, which share its pool) reach the master the
Sentinel names; when the master dies the API keeps answering (throttles fail open, docs/security.md "Degrade,
don't fail"), and once the Sentinel has promoted the replica the cache is back on it, with what was replicated."""

from __future__ import annotations

import pytest
import redis
from django.core.cache import cache

from common.degrade import cache_dependency
from tests.support.processes import redis_sentinel, redis_server, wait_until

pytestmark = pytest.mark.faults
MASTER = "cwtest"


@pytest.fixture
def sentinel_cache(settings):
    with redis_server("--repl-diskless-sync-delay", "0") as master, redis_server() as replica:
        replica_client = redis.Redis(host="127.0.0.1", port=replica.port)
        replica_client.replicaof("127.0.0.1", master.port)
        wait_until(lambda: replica_client.info("replication")["master_link_status"] == "up", "the replica's link")
        with redis_sentinel(master, MASTER) as sentinel_port:
            settings.REDIS_SENTINEL_MASTER = MASTER
            settings.CACHES = {"default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": [f"sentinel://127.0.0.1:{sentinel_port}/0"],
                "KEY_PREFIX": "sentinel-test",
                "OPTIONS": {"pool_class": "common.sentinel.SentinelPool", "socket_connect_timeout": 1.0,
                            "socket_timeout": 2.0},
            }}
            yield master, replica, redis.Redis(host="127.0.0.1", port=sentinel_port, socket_timeout=1)
    cache_dependency.down = False


def test_the_cache_sentinels_master_and_its_failover(sentinel_cache, staff_client, clinic):
    master, replica, sentinel = sentinel_cache
    cache.set("kept", "before the failover")
    assert redis.Redis(host="127.0.0.1", port=master.port).keys("sentinel-test:*")  # on the master it names
    url = f"/api/v1/clinics/{clinic.ref}/treatments/"
    assert staff_client.get(url).status_code == 200
    wait_until(lambda: replica.process and redis.Redis(host="127.0.0.1", port=replica.port).keys("sentinel-test:*"),
               "the write replicated")

    master.stop()
    assert [staff_client.get(url).status_code for _ in range(3)] == [200, 200, 200]  # throttles fail open
    wait_until(lambda: sentinel.sentinel_get_master_addr_by_name(MASTER)[1] == replica.port,
               "the Sentinel promoting the replica")

    def cache_answers() -> bool:
        try:
            return cache.get("kept") == "before the failover"
        except (redis.RedisError, OSError):
            return False  # a pooled connection to the old master breaks once

    wait_until(cache_answers, "the cache on the promoted replica")
    cache.set("after", 1)
    assert redis.Redis(host="127.0.0.1", port=replica.port).get("sentinel-test:1:after") == b"1"
    assert staff_client.get(url).status_code == 200
