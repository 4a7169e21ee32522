"""Issue 16: X-Forwarded-For is honoured only from configured proxies; throttles key on the honest address."""

from __future__ import annotations

import pytest
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle

from common.clientaddr import client_address

INTAKE = "/api/v1/events/patient-scheduling-assessment-changed"


def test_forwarded_for_is_ignored_without_configured_proxies(settings):
    settings.TRUSTED_PROXIES, settings.NUM_PROXIES = [], 0
    assert client_address({"REMOTE_ADDR": "203.0.113.9", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}) == "203.0.113.9"


def test_a_trusted_proxy_s_forwarded_for_names_the_first_untrusted_hop(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    meta = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "6.6.6.6, 198.51.100.7, 10.0.0.9"}
    assert client_address(meta) == "198.51.100.7"  # 6.6.6.6 was written by the client itself


def test_an_untrusted_peer_s_forwarded_for_is_ignored_even_with_proxies_configured(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert client_address({"REMOTE_ADDR": "198.51.100.7", "HTTP_X_FORWARDED_FOR": "10.0.0.1"}) == "198.51.100.7"


@pytest.mark.parametrize(("count", "expected"), [(1, "198.51.100.7"), (2, "6.6.6.6"), (5, "6.6.6.6")])
def test_num_proxies_takes_that_hop_from_the_right(settings, count, expected):
    settings.TRUSTED_PROXIES, settings.NUM_PROXIES = [], count
    meta = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "6.6.6.6, 198.51.100.7"}
    assert client_address(meta) == expected


def test_varying_x_forwarded_for_does_not_dodge_the_anonymous_throttle(anon_client, monkeypatch, db):
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {**api_settings.DEFAULT_THROTTLE_RATES, "anon": "3/min"})
    answers = [
        anon_client.post(INTAKE, data=b"{}", content_type="application/json", HTTP_X_FORWARDED_FOR=f"10.1.1.{i}")
        for i in range(4)
    ]
    assert [a.status_code for a in answers] == [401, 401, 401, 429]
