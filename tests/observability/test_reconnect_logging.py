"""Workers and beat with the broker gone: a warning and its traceback once, then a back-off, not a
traceback per retry (15,000 lines in 3.5 minutes before)."""

from __future__ import annotations

import logging
import sys

import pytest

from observability.beat import RecordingScheduler, beat_broker
from observability.logs import RepeatBackoffFilter
from observability.models import Heartbeat, ProcessRole


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(name: str = "celery.worker.consumer.consumer", msg: str = "consumer: Cannot connect to %s: %s."):
    try:
        raise ConnectionError("Error 111 connecting")
    except ConnectionError:
        exc_info = sys.exc_info()
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, ("redis://x", "refused"), exc_info)


def test_a_reconnect_error_repeated_every_200_ms_for_210_s_passes_about_ten_times():
    clock = Clock()
    backoff = RepeatBackoffFilter(clock=clock)
    passed = []
    for _ in range(1050):
        record = _record()
        if backoff.filter(record):
            passed.append(record)
        clock.now += 0.2
    assert 5 <= len(passed) <= 12
    assert passed[0].exc_info is not None  # the first keeps its traceback
    assert all(r.exc_info is None for r in passed[1:])
    assert "similar lines held back" in passed[-1].getMessage()


def test_a_quiet_kind_starts_again_from_its_first_record():
    clock = Clock()
    backoff = RepeatBackoffFilter(clock=clock, max_interval=300)
    assert backoff.filter(_record())
    clock.now += 0.5
    assert not backoff.filter(_record())
    clock.now += 301
    record = _record()
    assert backoff.filter(record) and record.exc_info is not None


def test_other_loggers_and_info_lines_are_never_held_back():
    backoff = RepeatBackoffFilter(clock=Clock())
    assert all(backoff.filter(_record(name="waitlist.dispatch.promotion")) for _ in range(20))
    info = logging.LogRecord("celery.beat", logging.INFO, __file__, 1, "tick", (), None)
    assert all(backoff.filter(info) for _ in range(20))


@pytest.mark.django_db
def test_beat_with_the_broker_down_says_so_once_and_records_that_it_cannot_send(caplog, tmp_path):
    from config.celery import app

    original = app.conf.broker_url

    def reset(url):
        app.conf.broker_url = url
        app._pool = None
        app.amqp._producer_pool = None

    reset("redis://127.0.0.1:1/0")
    beat_broker.down = False
    logger = logging.getLogger("common.degrade")
    saved = logger.disabled, logger.propagate
    logger.disabled, logger.propagate = False, False  # counted once, by this handler only
    logger.addHandler(caplog.handler)
    try:
        scheduler = RecordingScheduler(app=app, schedule_filename=str(tmp_path / "schedule"), lazy=True)
        entry = scheduler.Entry(name="t", task="waitlist.tasks.expire_offers", schedule=5.0, app=app)
        for _ in range(5):
            scheduler.apply_entry(entry)
    finally:
        logger.removeHandler(caplog.handler)
        logger.disabled, logger.propagate = saved
        reset(original)
        beat_broker.down = False
    said = [r for r in caplog.records if "celery broker (beat) unavailable" in r.getMessage()]
    assert len(said) == 1
    assert not [r for r in caplog.records if r.getMessage().startswith("Message Error")]
    row = Heartbeat.objects.get(role=ProcessRole.BEAT)
    assert row.send_failed_at is not None and row.sent_at is None
