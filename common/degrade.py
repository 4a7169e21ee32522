"""Degrade, don't fail, when Redis or the broker is down (issue 16 part 3).

A ``Dependency`` logs one warning when a dependency starts failing and one line when it is back,
instead of a traceback per request. Callers decide what "degraded" means (fail open, fall back to
PostgreSQL, leave the follow-up to reconcile).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from redis.exceptions import RedisError

logger = logging.getLogger("common.degrade")

T = TypeVar("T")

#: What the cache and the broker raise when Redis cannot be reached.
REDIS_ERRORS: tuple[type[BaseException], ...] = (RedisError, OSError)


class Dependency:
    def __init__(self, name: str, consequence: str):
        self.name, self.consequence = name, consequence
        self.down = False
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            first, self.down = not self.down, True
        if first:
            logger.warning("%s unavailable (%s: %s); %s", self.name, type(exc).__name__, exc, self.consequence)

    def ok(self) -> None:
        if self.down:
            with self._lock:
                back, self.down = self.down, False
            if back:
                logger.warning("%s available again", self.name)


cache_dependency = Dependency("redis cache", "throttles fail open and sign-in counting uses PostgreSQL")
broker_dependency = Dependency("celery broker", "follow-up tasks are left to reconcile")


def cached(key: str, seconds: int, compute: Callable[[], T]) -> T:
    """``compute()``, kept in the cache for ``seconds`` under ``key`` (0 or less: computed every time). With Redis
    down it is computed every time: a read must not fail because its cache did."""
    return cached_answer(key, seconds, compute)[0]


def cached_answer(key: str, seconds: int, compute: Callable[[], T]) -> tuple[T, bool | None]:
    """``cached``, with whether the cache answered (None: caching off), for readers that report it."""
    from django.core.cache import cache

    if seconds <= 0:
        return compute(), None
    try:
        value = cache.get(key)
    except REDIS_ERRORS as exc:
        cache_dependency.failed(exc)
        return compute(), False
    if value is None:
        value = compute()
        try:
            cache.set(key, value, seconds)
        except REDIS_ERRORS as exc:
            cache_dependency.failed(exc)
            return value, False
    cache_dependency.ok()
    return value, True
