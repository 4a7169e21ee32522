"""At most N holders of a kind of work across the whole deployment: N PostgreSQL session advisory locks.

A slot is optimisation, never a guarantee: correctness stays with the row locks, fences and constraints of
the work itself, so a caller that cannot get a slot in time (or runs where slots are off) works without one.
What slots buy is throughput under contention: thirty-two dispatchers on two database cores that all work at
once mostly pass over each other's locked rows and fight for the CPU; N at a time (N about the database's
cores) do the same work with the rest asleep in the lock queue, costing nothing until a slot frees.

Session locks outlive the transaction that takes them and end with the connection (a crashed holder frees its
slot). Behind a transaction-mode pooler (``DATABASE_POOLER_TRANSACTION_MODE``) a session lock would stay with a
server connection another client then uses, so there slots are off, as they are with the fast paths off
(``FASTPATHS=off``): every caller then works without a slot.
"""

from __future__ import annotations

import logging
import math
import random
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connection, transaction

from .prepared import behind_transaction_pooler
from .switch import enabled

logger = logging.getLogger(__name__)

class Semaphore:
    """``size()`` slots named ``name``; a caller waits at most ``wait_seconds()`` for one. Both are read per
    acquisition (settings an operator may change without a code change). Slots count connections, not calls:
    a connection that asks again while it holds a slot may be given the same one (advisory locks nest)."""

    def __init__(self, name: str, *, size: Callable[[], int], wait_seconds: Callable[[], float]) -> None:
        self.name = name
        self.key = zlib.crc32(name.encode()) - 2**31  # the advisory lock's first int4 key
        self.size = size
        self.wait_seconds = wait_seconds

    def acquire(self) -> int | None:
        """A slot now held by this connection, or None: slots off, or none came free within the wait (then the
        caller works without one). Never waits inside a transaction (it may hold row locks a slot holder needs).
        A waiter queues for one slot, chosen at random, not for whichever frees first: with every slot taken,
        each has its queue, and a slow holder delays only its own."""
        size = self.size()
        if size <= 0 or not enabled() or behind_transaction_pooler(connection):
            return None
        start = random.randrange(size)
        from common import queries  # here, not at import: config.wsgi imports the fast paths before the apps load

        taken = queries.advisory_slot_take_free(self.key, start=start, size=size)
        if taken is not None:
            return taken
        wait = self.wait_seconds()
        if wait <= 0 or connection.in_atomic_block or not connection.get_autocommit():
            return None
        try:
            with transaction.atomic():  # lock_timeout=0 would wait for ever
                queries.advisory_slot_wait(self.key, start, timeout_ms=max(1, math.ceil(wait * 1000)))
        except DatabaseError:
            logger.warning("%s: no slot of %s came free within %s s; working without one", self.name, size, wait)
            return None
        return start

    def release(self, slot: int | None) -> None:
        if slot is None:
            return
        from common import queries

        try:
            queries.advisory_slot_release(self.key, slot)
        except DatabaseError:
            # The connection is gone (and the lock with it), or it cannot run a statement now (an aborted
            # transaction): closing it is the one sure way to free the slot.
            logger.warning("%s: slot %s not released by statement; closing the connection frees it", self.name, slot)
            connection.close()

    def usage(self) -> tuple[int, int]:
        """(slots held, connections waiting for one) across the deployment, from ``pg_locks``."""
        from common import queries

        return queries.advisory_slot_usage(self.key)

    @contextmanager
    def held(self) -> Iterator[int | None]:
        slot = self.acquire()
        try:
            yield slot
        finally:
            self.release(slot)
