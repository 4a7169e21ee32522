"""Too many requests get a typed 429 with Retry-After, not a bare error; the counter is one Redis integer
per key and window (issue 15: no pickled list of timestamps rewritten on every request)."""

from __future__ import annotations

from datetime import UTC, datetime

import time_machine
from django.core.cache import cache
from rest_framework.settings import api_settings
from rest_framework.throttling import UserRateThrottle

#: 20 s into a minute, so a minute window has 40 s left.
NOW = datetime(2030, 12, 3, 9, 0, 20, tzinfo=UTC)


def _rate(monkeypatch, rate: str) -> None:
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {**api_settings.DEFAULT_THROTTLE_RATES, "user": rate})


def test_a_user_over_the_rate_gets_429_throttled(staff_client, clinic, monkeypatch):
    _rate(monkeypatch, "3/min")
    answers = [staff_client.get(f"/api/v1/clinics/{clinic.ref}/treatments/") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[-1].json()["code"] == "THROTTLED"
    assert int(answers[-1]["Retry-After"]) > 0


def test_the_window_is_one_integer_counter_in_redis_and_retry_after_is_its_end(staff, staff_client, clinic,
                                                                               monkeypatch):
    _rate(monkeypatch, "3/min")
    with time_machine.travel(NOW, tick=False):
        answers = [staff_client.get(f"/api/v1/clinics/{clinic.ref}/treatments/") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[-1]["Retry-After"] == "40"
    window = int(NOW.timestamp() // 60)
    key = cache.make_and_validate_key(f"throttle_user_{staff.pk}:w{window}")
    client = cache._cache.get_client(key)
    assert client.get(key) == b"4"  # every request counted, the refused one too
    assert 0 < client.ttl(key) <= 61  # the window's key goes away on its own


def test_the_next_window_allows_again(staff_client, clinic, monkeypatch):
    _rate(monkeypatch, "2/min")
    url = f"/api/v1/clinics/{clinic.ref}/treatments/"
    with time_machine.travel(NOW, tick=False):
        assert [staff_client.get(url).status_code for _ in range(3)] == [200, 200, 429]
    with time_machine.travel(NOW.replace(second=59), tick=False):
        assert staff_client.get(url).status_code == 429  # the same window
    with time_machine.travel(NOW.replace(minute=1, second=0), tick=False):
        assert staff_client.get(url).status_code == 200


def test_users_are_counted_apart(staff_client, admin_client, clinic, monkeypatch):
    _rate(monkeypatch, "1/min")
    url = f"/api/v1/clinics/{clinic.ref}/treatments/"
    with time_machine.travel(NOW, tick=False):
        assert staff_client.get(url).status_code == 200
        assert staff_client.get(url).status_code == 429
        assert admin_client.get(url).status_code == 200


def test_a_redis_that_does_not_know_the_counter_script_gets_it_sent_whole(staff_client, clinic, monkeypatch):
    from common import throttling

    _rate(monkeypatch, "3/min")
    # As after a Redis restart or SCRIPT FLUSH (not run here: the Redis is shared): EVALSHA is refused.
    monkeypatch.setattr(throttling, "_COUNT_SHA", "0" * 40)
    url = f"/api/v1/clinics/{clinic.ref}/treatments/"
    with time_machine.travel(NOW, tick=False):
        assert [staff_client.get(url).status_code for _ in range(4)] == [200, 200, 200, 429]


def test_with_redis_down_the_throttle_lets_requests_through(staff_client, clinic, monkeypatch):
    import redis

    from common import throttling

    class Down:
        def evalsha(self, *args):
            raise redis.ConnectionError("down")

    _rate(monkeypatch, "1/min")
    monkeypatch.setattr(throttling, "redis_client", lambda cache: Down())
    url = f"/api/v1/clinics/{clinic.ref}/treatments/"
    assert [staff_client.get(url).status_code for _ in range(3)] == [200, 200, 200]
