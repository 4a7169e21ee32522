"""The replica's lag as ``common.replica.ReplicaLag`` measures it, from the WAL positions the two servers report
(``common.queries.wal_written`` on the primary, ``wal_replayed`` on the replica; here the test says what they
report, at times it gives). The console-level behaviour is in tests/operations/test_replica_reads.py."""

from __future__ import annotations

import pytest

from common import queries
from common.replica import ReplicaLag

PAGE = 8192


@pytest.fixture
def positions(monkeypatch, settings):
    settings.REPLICA_MAX_LAG_SECONDS, settings.REPLICA_LAG_CHECK_SECONDS = 5, 1.0
    reported = {"written": 0, "replayed": 0}
    monkeypatch.setattr(queries, "wal_written", lambda alias: reported["written"])
    monkeypatch.setattr(queries, "wal_replayed", lambda alias: (True, reported["replayed"]))
    return reported


def test_a_replica_replayed_past_a_sample_holds_what_was_committed_before_it(positions):
    gauge = ReplicaLag()
    positions.update(written=10 * PAGE + 100, replayed=10 * PAGE + 100)
    assert gauge.current(now=1000.0) and gauge.as_of == 1000.0
    positions.update(written=11 * PAGE, replayed=10 * PAGE + 100)  # behind from here on
    assert gauge.current(now=1003.0) and gauge.as_of == 1000.0
    positions["written"] = 11 * PAGE + 500
    assert not gauge.current(now=1005.5)  # 5.5 s since the replica was last known to hold everything
    positions.update(written=12 * PAGE, replayed=11 * PAGE)  # it replays the sample taken at 1003
    assert gauge.current(now=1006.5) and gauge.as_of == 1003.0


def test_one_byte_short_is_not_caught_up(positions):
    positions.update(written=10 * PAGE + 100, replayed=10 * PAGE + 99)
    assert not ReplicaLag().current(now=1000.0)


@pytest.mark.parametrize("header", [24, 40])
def test_an_idle_primarys_insert_position_past_a_page_header_is_reached_at_the_page_boundary(positions, header):
    """``pg_current_wal_insert_lsn()`` at a page's start points past its header; the end of the last record
    replayed points at the boundary: an idle primary's replica is caught up, not one header behind forever."""
    positions.update(written=10 * PAGE + header, replayed=10 * PAGE)
    assert ReplicaLag().current(now=1000.0)


def test_a_sample_is_taken_at_most_every_check_interval(positions, monkeypatch):
    calls = []
    monkeypatch.setattr(queries, "wal_written", lambda alias: calls.append(alias) or 0)
    gauge = ReplicaLag()
    for now in (1000.0, 1000.3, 1000.9, 1001.0, 1001.5):
        gauge.current(now=now)
    assert len(calls) == 2
