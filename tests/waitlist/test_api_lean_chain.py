"""Issue 15: token-authenticated /api/ requests take a lean middleware chain (common/fastpath/lean_api.py).

Driven through the real WSGI application (``SplitWSGIHandler``, what gunicorn serves), not the test
client (which builds its own handler with the full chain): a claim and its replay, the headers an API
response keeps, and the console and session paths still getting every middleware.
"""

from __future__ import annotations

import json

import pytest
from django.test import RequestFactory

from common.fastpath.lean_api import SplitWSGIHandler, is_lean_request, lean_middleware
from tests.conftest import token_client
from waitlist.models import OfferStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def app():
    return SplitWSGIHandler()


def _call(app, request) -> tuple[str, dict[str, list[str]], bytes]:
    seen: dict = {}

    def start_response(status, headers, exc_info=None):
        seen["status"] = status
        seen["headers"] = headers

    response = app(request.environ, start_response)
    try:
        body = b"".join(response)
    finally:
        response.close()
    headers: dict[str, list[str]] = {}
    for name, value in seen["headers"]:
        headers.setdefault(name.lower(), []).append(value)
    return seen["status"], headers, body



def test_routing_only_token_api_requests_are_lean():
    assert is_lean_request({"PATH_INFO": "/api/v1/clinics/", "HTTP_AUTHORIZATION": "Token abc"})
    assert is_lean_request({"PATH_INFO": "/api/v1/clinics/", "HTTP_AUTHORIZATION": "token abc"})
    assert not is_lean_request({"PATH_INFO": "/api/v1/clinics/"})  # session-authenticated API call
    assert not is_lean_request({"PATH_INFO": "/api/v1/clinics/", "HTTP_AUTHORIZATION": "Bearer abc"})
    assert not is_lean_request({"PATH_INFO": "/console/", "HTTP_AUTHORIZATION": "Token abc"})
    assert not is_lean_request({"PATH_INFO": "/apix/", "HTTP_AUTHORIZATION": "Token abc"})


def test_lean_chain_keeps_logging_metrics_and_security_middleware(settings):
    lean = lean_middleware()
    assert lean[:2] == [
        "observability.correlation.CorrelationIdMiddleware",
        "observability.metrics.RequestLatencyMiddleware",
    ]
    for kept in (
        "django.middleware.security.SecurityMiddleware",
        "common.middleware.JunkRequestMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    ):
        assert kept in lean
    for skipped in (
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
    ):
        assert skipped not in lean and skipped in settings.MIDDLEWARE


def test_claim_and_replay_through_the_lean_chain(app, world, offer):
    token = token_client(world.staff)._credentials["HTTP_AUTHORIZATION"]
    path = f"/api/v1/clinics/{world.clinic.ref}/offers/{offer.ref}/claim"
    version = offer.version

    def claim():
        request = RequestFactory().post(
            path, json.dumps({"expected_version": version}), content_type="application/json",
            headers={"Authorization": token, "Idempotency-Key": "lean-1", "X-Correlation-ID": "lean-corr-1"},
        )
        return _call(app, request)

    status, headers, body = claim()
    assert status.startswith("200"), body
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED
    # What an API response keeps: the correlation id and the security headers.
    assert headers["x-correlation-id"] == ["lean-corr-1"]
    assert headers["x-content-type-options"] == ["nosniff"]
    assert headers["x-frame-options"] == ["DENY"]
    assert headers["referrer-policy"] == ["same-origin"]
    # What it sheds: no session or CSRF cookie, no Vary: Cookie, no HTML policy.
    assert "set-cookie" not in headers
    assert not any("cookie" in v.lower() for v in headers.get("vary", []))
    assert "content-security-policy" not in headers
    # The replay is the stored answer, byte for byte.
    status2, _headers2, body2 = claim()
    assert status2.startswith("200") and body2 == body


def test_out_of_scope_offer_is_404_through_the_lean_chain(app, world, offer, outsider):
    token = token_client(outsider)._credentials["HTTP_AUTHORIZATION"]
    request = RequestFactory().post(
        f"/api/v1/clinics/{world.clinic.ref}/offers/{offer.ref}/claim", json.dumps({"expected_version": 1}),
        content_type="application/json", headers={"Authorization": token, "Idempotency-Key": "lean-2"},
    )
    status, _headers, body = _call(app, request)
    assert status.startswith("404"), body
    missing = RequestFactory().post(
        f"/api/v1/clinics/{world.clinic.ref}/offers/off_missing/claim", json.dumps({"expected_version": 1}),
        content_type="application/json", headers={"Authorization": token, "Idempotency-Key": "lean-3"},
    )
    status_missing, _h, body_missing = _call(app, missing)
    assert status_missing.startswith("404")
    assert body == body_missing  # out of scope looks exactly like missing


def test_bad_token_is_401_through_the_lean_chain(app, world):
    request = RequestFactory().get("/api/v1/clinics/", headers={"Authorization": "Token not-a-token"})
    status, headers, _body = _call(app, request)
    assert status.startswith("401")
    assert "set-cookie" not in headers


def test_console_keeps_the_full_chain(app):
    status, headers, body = _call(app, RequestFactory().get("/console/login/"))
    assert status.startswith("200"), body[:200]
    assert "content-security-policy" in headers  # CSP middleware ran
    assert any(c.strip().startswith("csrftoken=") for c in headers.get("set-cookie", []))  # CSRF middleware ran
    assert headers["x-frame-options"] == ["DENY"]


def test_session_authenticated_api_call_keeps_the_full_chain(app, world):
    from django.test import Client

    client = Client()
    client.force_login(world.staff)
    request = RequestFactory().get("/api/v1/clinics/")
    request.environ["HTTP_COOKIE"] = client.cookies.output(header="", sep="; ").strip()
    status, headers, body = _call(app, request)
    assert status.startswith("200"), body[:300]
    assert "content-security-policy" in headers
