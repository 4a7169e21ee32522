"""Providers against real loopback servers; quiet hours and contact caps."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from common.models import OutboxStatus
from common.notify import (
    ConsoleProvider,
    EmailProvider,
    Notice,
    SendWindow,
    WebhookProvider,
    check_send_window,
    provider_for,
    quiet_hours_until,
)
from common.outbox import DeliveryDeferred, DeliveryFailed
from common.services import outbox_enqueue
from tests.support.servers import http_receiver, smtp_sink

SEOUL = ZoneInfo("Asia/Seoul")
QUIET = (time(21), time(8))


def notice(**overrides):
    fields = {"message_ref": "obx_1", "clinic_ref": "cl_1", "recipient_ref": "pt_1", "language": "en",
              "subject": "A time opened up", "body": "Claim it: http://x/claim/t/", "email": "p@example.com",
              "phone": "+821055500000", "link": "http://x/claim/t/"}
    fields.update(overrides)
    return Notice(**fields)


def test_email_provider_delivers_through_a_real_smtp_server(settings):
    with smtp_sink() as (host, port, sink):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
        EmailProvider().send(notice())
        assert sink.received.wait(5)
    assert sink.messages[0]["to"] == ["p@example.com"]
    assert "Claim it" in sink.messages[0]["data"]


def test_email_provider_with_no_server_is_a_bounded_failure(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 1, 2
    with pytest.raises(DeliveryFailed) as info:
        EmailProvider().send(notice())
    assert info.value.code == "SMTP_UNAVAILABLE"


def test_webhook_provider_signs_the_exact_body():
    with http_receiver() as (url, seen):
        WebhookProvider(url, "s3cret").send(notice())
    body = seen[0]["body"]
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert seen[0]["headers"]["X-Signature"] == f"sha256={expected}"
    assert json.loads(body)["to"] == "+821055500000"


@pytest.mark.parametrize(("status", "code"), [(503, "WEBHOOK_UNAVAILABLE"), (400, "WEBHOOK_REJECTED")])
def test_webhook_failures_map_to_bounded_codes(status, code):
    with http_receiver([status]) as (url, _seen):
        with pytest.raises(DeliveryFailed) as info:
            WebhookProvider(url, "s").send(notice())
    assert info.value.code == code


def test_a_redirect_is_webhook_rejected_and_not_followed():
    with http_receiver([307]) as (url, seen):
        with pytest.raises(DeliveryFailed) as info:
            WebhookProvider(url, "s").send(notice())
    assert info.value.code == "WEBHOOK_REJECTED" and len(seen) == 1


def test_a_gateway_that_does_not_answer_in_time_is_webhook_timeout():
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)  # accepts the connection, never answers
        with pytest.raises(DeliveryFailed) as info:
            WebhookProvider(f"http://127.0.0.1:{server.getsockname()[1]}/hook", "s", timeout=(1, 0.2)).send(notice())
    assert info.value.code == "WEBHOOK_TIMEOUT"


def test_a_gateway_answering_after_the_connect_timeout_but_within_the_read_timeout_is_delivered():
    import socket
    import threading

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def answer_late():
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                threading.Event().wait(0.6)  # the gateway's own processing time, not an expiry
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

        thread = threading.Thread(target=answer_late)
        thread.start()
        WebhookProvider(f"http://127.0.0.1:{server.getsockname()[1]}/hook", "s", timeout=(0.3, 5)).send(notice())
        thread.join()


def test_the_webhook_goes_through_the_environments_proxy_with_its_credentials(monkeypatch):
    """Through a proxy too, the request names the address the egress guard checked (common/egress.py), so the
    proxy's own lookup cannot send it elsewhere; ``Host`` names the gateway. The made-up name's address is the
    only thing the test sets in the resolver."""
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, *a, **k: (
        [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))] if host == "gateway.invalid"
        else real(host, port, *a, **k)))
    with http_receiver() as (proxy_url, seen):
        monkeypatch.setenv("HTTP_PROXY", proxy_url.replace("http://", "http://relay:s%40fe@"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        WebhookProvider("http://gateway.invalid/hook-via-proxy", "s").send(notice())
    assert seen[0]["path"] == "http://93.184.216.34:80/hook-via-proxy"
    headers = {name.lower(): value for name, value in seen[0]["headers"].items()}
    assert headers["host"] == "gateway.invalid"
    assert headers["proxy-authorization"] == "Basic " + base64.b64encode(b"relay:s@fe").decode()


def test_a_refused_connection_is_webhook_unavailable():
    with pytest.raises(DeliveryFailed) as info:
        WebhookProvider("http://127.0.0.1:1/hook", "s", timeout=(1, 1)).send(notice())
    assert info.value.code == "WEBHOOK_UNAVAILABLE"


def test_the_console_provider_never_logs_the_contact(caplog):
    caplog.set_level("INFO")
    ConsoleProvider().send(notice())
    assert "obx_1" in caplog.text
    assert "p@example.com" not in caplog.text and "+821055500000" not in caplog.text


def test_provider_is_chosen_per_clinic():
    assert provider_for({}).name == "console"
    assert provider_for({"notification": {"provider": "email"}}).name == "email"
    assert provider_for({"notification": {"provider": "webhook", "webhook_url": "http://h"}}).name == "webhook"


@pytest.mark.parametrize(
    ("local", "expected_end"),
    [
        (datetime(2030, 1, 5, 22, 0, tzinfo=SEOUL), datetime(2030, 1, 6, 8, 0, tzinfo=SEOUL)),
        (datetime(2030, 1, 5, 6, 30, tzinfo=SEOUL), datetime(2030, 1, 5, 8, 0, tzinfo=SEOUL)),
        (datetime(2030, 1, 5, 12, 0, tzinfo=SEOUL), None),
        (datetime(2030, 1, 5, 8, 0, tzinfo=SEOUL), None),
    ],
)
def test_quiet_hours_across_midnight_in_the_clinic_zone(local, expected_end):
    assert quiet_hours_until(*QUIET, "Asia/Seoul", local.astimezone(ZoneInfo("UTC"))) == expected_end


def test_the_daily_contact_cap_defers_until_the_oldest_send_ages_out(db):
    now = timezone.now()
    for hours_ago in (20, 10, 1):
        message = outbox_enqueue(topic="t", tenant_group_ref="tg", clinic_ref="cl", aggregate_ref="a",
                                 payload={}, recipient_ref="pt_cap")
        message.status, message.sent_at = OutboxStatus.SENT, now - timedelta(hours=hours_ago)
        message.save(update_fields=["status", "sent_at"])
    with pytest.raises(DeliveryDeferred) as info:
        check_send_window(SendWindow("UTC", cap_per_day=3), recipient_ref="pt_cap", now=now)
    assert info.value.code == "CONTACT_CAP"
    assert info.value.until == now - timedelta(hours=20) + timedelta(days=1)
    check_send_window(SendWindow("UTC", cap_per_day=4), recipient_ref="pt_cap", now=now)


def test_a_webhook_to_an_internal_address_is_blocked_unless_the_clinic_allows_it(settings):
    """Issue 43: the webhook URL passes the egress guard at every send (common/egress.py)."""
    settings.EGRESS_ALLOWLIST = []
    with http_receiver() as (url, seen):
        with pytest.raises(DeliveryFailed) as info:
            provider_for({"notification": {"provider": "webhook", "webhook_url": url}}).send(notice())
        assert info.value.code == "WEBHOOK_BLOCKED" and seen == []
        provider_for({"notification": {"provider": "webhook", "webhook_url": url},
                      "egress_allowlist": ["127.0.0.1/32"]}).send(notice())
    assert len(seen) == 1
