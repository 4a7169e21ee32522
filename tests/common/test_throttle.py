"""Too many requests get a typed 429 with Retry-After, not a bare error."""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import UserRateThrottle


def test_a_user_over_the_rate_gets_429_throttled(staff_client, clinic, monkeypatch):
    monkeypatch.setattr(UserRateThrottle, "THROTTLE_RATES", {**api_settings.DEFAULT_THROTTLE_RATES, "user": "3/min"})
    answers = [staff_client.get(f"/api/v1/clinics/{clinic.ref}/treatments/") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[-1].json()["code"] == "THROTTLED"
    assert int(answers[-1]["Retry-After"]) > 0
