"""Holding and watching ``common.fastpath.Semaphore`` slots from tests, on real connections."""

from __future__ import annotations

import threading

from django.db import connection

from common.fastpath import Semaphore


def slot_held_elsewhere(semaphore: Semaphore):
    """Another connection takes a slot and keeps it until ``release`` is set: ``(got, release, done)``, ``got``
    the slot it took (a one-item list), ``done`` set once it gave the slot back and closed its connection."""
    taken, release, done = threading.Event(), threading.Event(), threading.Event()
    got: list = []

    def hold() -> None:
        try:
            got.append(semaphore.acquire())
            taken.set()
            release.wait(timeout=30)
            semaphore.release(got[0])
        finally:
            connection.close()
            done.set()

    threading.Thread(target=hold, daemon=True).start()
    assert taken.wait(timeout=30)
    return got, release, done


def queued_for_a_slot(semaphore: Semaphore) -> bool:
    """Whether a connection is (or comes to be, within 30 s) queued for one of ``semaphore``'s slots: a bounded
    poll of ``pg_locks``, not a timed expiry."""
    for _ in range(3000):
        if semaphore.usage()[1]:
            return True
        threading.Event().wait(0.01)
    return False
