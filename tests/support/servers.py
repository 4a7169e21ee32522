"""Real loopback servers for delivery tests: an SMTP sink and a scriptable HTTP receiver."""

from __future__ import annotations

import json
import socket
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller


class _Sink:
    def __init__(self):
        self.messages: list[dict] = []
        self.received = threading.Event()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.messages.append({"to": envelope.rcpt_tos, "data": envelope.content.decode("utf8", "replace")})
        self.received.set()
        return "250 OK"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def smtp_sink():
    """An SMTP server on 127.0.0.1; yields (host, port, sink)."""
    sink = _Sink()
    controller = Controller(sink, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller.hostname, controller.port, sink
    finally:
        controller.stop()


@contextmanager
def http_receiver(statuses: list[int] | None = None):
    """An HTTP server on 127.0.0.1 that answers POSTs with ``statuses`` in turn (then 200)."""
    requests_seen: list[dict] = []
    script = list(statuses or [])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's hook name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            requests_seen.append({"headers": dict(self.headers), "body": body, "path": self.path})
            status = script.pop(0) if script else 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"ok": status < 400}).encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests_seen
    finally:
        server.shutdown()
        server.server_close()
