"""The cache's Sentinel pool reads the broker's ``sentinel://`` URL form (common/sentinel.py)."""

import pytest

from common.sentinel import parse_sentinel_url


def test_sentinel_url_lists_every_sentinel_with_the_database_and_password():
    url = "sentinel://:s3cret@127.0.0.1:56381/4;sentinel://127.0.0.1:56382/4;sentinel://127.0.0.1/4"
    assert parse_sentinel_url(url) == ([("127.0.0.1", 56381), ("127.0.0.1", 56382), ("127.0.0.1", 26379)], 4, "s3cret")


def test_sentinel_url_refuses_a_plain_redis_url():
    with pytest.raises(ValueError):
        parse_sentinel_url("redis://127.0.0.1:6379/0")
