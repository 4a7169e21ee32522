"""``common.fastpath.Semaphore``: N session advisory locks bound a kind of work across processes; a slot is only ever an
optimisation (a caller that gets none in time works without one). Real connections, one per thread."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from common.fastpath import Semaphore
from tests.support.slots import queued_for_a_slot, slot_held_elsewhere

pytestmark = pytest.mark.django_db(transaction=True)


def _semaphore(size: int = 2, wait: float = 5.0, name: str = "tests.semaphore") -> Semaphore:
    return Semaphore(name, size=lambda: size, wait_seconds=lambda: wait)


def _advisory_locks_of_this_connection() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        return cursor.fetchone()[0]


def test_slots_are_distinct_and_bounded_across_connections():
    semaphore = _semaphore(size=2, wait=0)
    first, release_first, first_done = slot_held_elsewhere(semaphore)
    second, release_second, second_done = slot_held_elsewhere(semaphore)
    try:
        assert sorted(first + second) == [0, 1]
        assert semaphore.acquire() is None  # both held, and this caller may not wait
        release_first.set()
        assert first_done.wait(timeout=30)
        assert semaphore.acquire() == first[0]
    finally:
        release_first.set()
        release_second.set()
        assert second_done.wait(timeout=30)
    semaphore.release(first[0])
    assert _advisory_locks_of_this_connection() == 0


def test_a_waiter_gets_the_slot_its_holder_gives_back():
    semaphore = _semaphore(size=1, wait=30)
    _got, release, done = slot_held_elsewhere(semaphore)
    result: list = []
    waiter = threading.Thread(target=lambda: (result.append(semaphore.acquire()), connection.close()))
    waiter.start()
    assert queued_for_a_slot(semaphore)
    assert semaphore.usage()[1] == 1
    release.set()
    waiter.join(timeout=30)
    assert result == [0]
    assert done.wait(timeout=30)


def test_a_caller_that_waits_too_long_works_without_a_slot():
    semaphore = _semaphore(size=1, wait=0.05)
    _got, release, done = slot_held_elsewhere(semaphore)
    try:
        assert semaphore.acquire() is None
        assert semaphore.usage()[1] == 0  # the wait ended; nothing left queued
        with connection.cursor() as cursor:  # and the lock timeout did not outlive that wait
            cursor.execute("SHOW lock_timeout")
            assert cursor.fetchone()[0] == "0"
    finally:
        release.set()
        assert done.wait(timeout=30)


def test_never_waits_inside_a_transaction():
    semaphore = _semaphore(size=1, wait=30)
    _got, release, done = slot_held_elsewhere(semaphore)
    try:
        with transaction.atomic():
            assert semaphore.acquire() is None  # at once: the caller may hold row locks a slot holder needs
    finally:
        release.set()
        assert done.wait(timeout=30)


def test_a_closed_connection_frees_its_slot():
    semaphore = _semaphore(size=1, wait=0)
    holder = threading.Thread(target=lambda: (semaphore.acquire(), connection.close()))  # never released
    holder.start()
    holder.join(timeout=30)
    # PostgreSQL ends the backend a moment after its client closed, and its session locks go with it: wait on the
    # lock itself (the same slots, a caller that may wait), not on a clock.
    slot = _semaphore(size=1, wait=30).acquire()
    assert slot == 0
    semaphore.release(slot)


def test_the_lock_is_held_only_inside_held():
    semaphore = _semaphore(size=3)
    with semaphore.held() as slot:
        assert slot is not None and _advisory_locks_of_this_connection() == 1
    assert _advisory_locks_of_this_connection() == 0


def test_size_zero_turns_slots_off():
    assert _semaphore(size=0).acquire() is None


def test_behind_a_transaction_pooler_slots_are_off(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "DISABLE_SERVER_SIDE_CURSORS", True)
    assert _semaphore(size=2).acquire() is None
    assert _advisory_locks_of_this_connection() == 0


def test_two_names_have_their_own_slots():
    first, second = _semaphore(size=1, wait=0, name="tests.a"), _semaphore(size=1, wait=0, name="tests.b")
    _got, release, done = slot_held_elsewhere(first)
    try:
        assert first.acquire() is None
        slot = second.acquire()
        assert slot == 0
        second.release(slot)
    finally:
        release.set()
        assert done.wait(timeout=30)
