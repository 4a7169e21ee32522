"""Django's Redis cache through Redis Sentinel (docs/deployment.md "The cluster").

Django's built-in ``RedisCache`` builds its pools with ``pool_class.from_url(location, **options)``; this pool
class reads the same ``sentinel://`` URL kombu's broker transport takes (``sentinel://host:port/db`` entries
joined by ``;``) and asks the Sentinels for the current master of ``REDIS_SENTINEL_MASTER`` on every new
connection, so after a failover the cache and the throttles follow the promoted replica. The throttles' own
client (``common.fastpath.redis_clients``) shares these pools.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from django.conf import settings
from redis.sentinel import Sentinel, SentinelConnectionPool


def parse_sentinel_url(url: str) -> tuple[list[tuple[str, int]], int, str | None]:
    """(sentinel addresses, database number, password) of ``sentinel://[:pw@]host:port[/db];sentinel://…``."""
    addresses, db, password = [], 0, None
    for part in filter(None, (piece.strip() for piece in url.split(";"))):
        parsed = urlsplit(part)
        if parsed.scheme != "sentinel" or not parsed.hostname:
            raise ValueError(f"not a sentinel:// URL: {part!r}")
        addresses.append((parsed.hostname, parsed.port or 26379))
        if parsed.path.strip("/"):
            db = int(parsed.path.strip("/"))
        if parsed.password:
            password = unquote(parsed.password)
    if not addresses:
        raise ValueError("no Sentinel address in the URL")
    return addresses, db, password


class SentinelPool(SentinelConnectionPool):
    """A ``SentinelConnectionPool`` made from a ``sentinel://`` URL (Django's ``pool_class`` option)."""

    @classmethod
    def from_url(cls, url: str, **options):
        addresses, db, password = parse_sentinel_url(url)
        timeout = options.get("socket_connect_timeout", 1.0)
        sentinel = Sentinel(addresses, sentinel_kwargs={"socket_timeout": timeout, "socket_connect_timeout": timeout})
        if password is not None:
            options.setdefault("password", password)
        return cls(settings.REDIS_SENTINEL_MASTER, sentinel, db=db, **options)
