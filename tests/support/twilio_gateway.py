"""A loopback Twilio: a threaded HTTP server on 127.0.0.1 that speaks Twilio's Messages REST API, and the
webhooks Twilio would post back (delivery receipts, a patient's reply), signed as Twilio signs them.

``POST /2010-04-01/Accounts/{AccountSid}/Messages.json`` (HTTP basic auth: the account sid and auth token,
form fields To, From, Body, StatusCallback) answers 201 with Twilio's message JSON (``sid`` ``SM…``, ``status``
``queued``), or the scripted error (``fail_next``: Twilio's error JSON with the given HTTP status). The webhooks
are posted to the application under test with Django's test client, signed with ``twilio.request_validator``'s
algorithm over the public URL the application reads (``common.notify.twilio_webhook_url``).
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from django.test import Client
from twilio.request_validator import RequestValidator

from common.notify import twilio_webhook_url

ACCOUNT_SID = "AC" + "0" * 32
AUTH_TOKEN = "loopback-auth-token"
SENDER = "+15005550006"


@dataclass
class Gateway:
    base_url: str
    sent: list[dict] = field(default_factory=list)
    fail_next: list[tuple[int, int]] = field(default_factory=list)  # (HTTP status, Twilio error code)
    _sids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def to(self, number: str) -> list[dict]:
        return [m for m in self.sent if m["To"] == number]

    def signed_post(self, name: str, params: dict, *, signature: str | None = None, client: Client | None = None):
        """POST ``params`` to the webhook ``name`` (``inbound``/``status``) as Twilio would, signed (or with the
        given ``signature``, "" for none)."""
        url = twilio_webhook_url(name)
        if signature is None:
            signature = RequestValidator(AUTH_TOKEN).compute_signature(url, params)
        headers = {"HTTP_X_TWILIO_SIGNATURE": signature} if signature else {}
        return (client or Client()).post(f"/texts/twilio/{name}", params, **headers)

    def receipt(self, sid: str, status: str, error_code: str = "", **kw):
        params = {"MessageSid": sid, "MessageStatus": status, "AccountSid": ACCOUNT_SID}
        if error_code:
            params["ErrorCode"] = error_code
        return self.signed_post("status", params, **kw)

    def reply(self, sender: str, body: str, sid: str | None = None, **kw):
        """A patient's text to the clinic's number (``sid``: the provider's id, fresh unless given)."""
        params = {"MessageSid": sid or self.new_sid("SMin"), "AccountSid": ACCOUNT_SID, "From": sender,
                  "To": SENDER, "Body": body, "NumMedia": "0"}
        return self.signed_post("inbound", params, **kw)

    def new_sid(self, prefix: str = "SM") -> str:
        with self._lock:
            return f"{prefix}{next(self._sids):0{34 - len(prefix)}d}"


@contextmanager
def twilio_gateway(settings):
    """Start the gateway and point the application at it (``TWILIO_*`` settings); yields the ``Gateway``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    gateway = Gateway(base_url=f"http://127.0.0.1:{server.server_address[1]}")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's hook name
            expected = "Basic " + base64.b64encode(f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                return self._json(401, {"code": 20003, "message": "Authenticate", "status": 401})
            if self.path != f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json":
                return self._json(404, {"code": 20404, "message": "Not found", "status": 404})
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
            if gateway.fail_next:
                status, code = gateway.fail_next.pop(0)
                return self._json(status, {"code": code, "message": "scripted failure", "status": status})
            sid = gateway.new_sid()
            message = {"sid": sid, "account_sid": ACCOUNT_SID, "to": form.get("To"), "from": form.get("From"),
                       "body": form.get("Body"), "status": "queued", "num_segments": "1", "direction": "outbound-api",
                       "api_version": "2010-04-01", "error_code": None, "error_message": None, "price": None,
                       "date_created": "Thu, 05 Dec 2030 01:00:00 +0000", "date_updated": None, "date_sent": None,
                       "uri": f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/{sid}.json"}
            gateway.sent.append({**form, "sid": sid})
            return self._json(201, message)

        def _json(self, status: int, body: dict):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server.RequestHandlerClass = Handler
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN = ACCOUNT_SID, AUTH_TOKEN
    settings.TWILIO_FROM, settings.TWILIO_API_BASE_URL = SENDER, gateway.base_url
    try:
        yield gateway
    finally:
        server.shutdown()
        server.server_close()
