"""One ``redis.Redis`` per connection pool of Django's Redis cache, for the throttles (issue 15).

Django's ``RedisCacheClient.get_client`` builds a new ``redis.Redis`` (and its table of ~170 response
callbacks) on every call; a throttle asks on every request. This keeps one client per pool (the pool is
Django's, so connections are shared exactly as before). Off (``FASTPATHS=off``): Django's ``get_client``.
"""

from __future__ import annotations

from typing import Any

from .switch import enabled

_clients: dict[object, object] = {}


def redis_client(cache: Any) -> Any:
    """A write client of ``cache`` (Django's ``RedisCache``): commands go to its first server."""
    cache_client = cache._cache
    if not enabled():
        return cache_client.get_client(write=True)
    pool = cache_client._get_connection_pool(True)
    client = _clients.get(pool)
    if client is None:
        if len(_clients) >= 8:  # settings overridden (tests): drop clients of pools no longer in use
            _clients.clear()
        client = _clients[pool] = cache_client._client(connection_pool=pool)
    return client
