"""The storm benchmark's SMS gateway stand-in: ``python -m bench.receiver PORT OUT SECRET``.

A threaded HTTP server on 127.0.0.1 that accepts the webhook provider's signed POSTs
(``common.notify.WebhookProvider``), checks the signature, and appends one line per notice to ``OUT``:
``<arrival epoch seconds>\t<message ref>\t<idempotency key>\t<link>``, flushed at once so the benchmark
can tail it while the storm runs. A bad signature is answered 401 and recorded with ``BAD`` in place of
the ref. It sends nothing anywhere and imports nothing of the project (no Django), so its own CPU
stays small beside the deployment's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(port: int, out_path: str, secret: str) -> None:
    lock = threading.Lock()
    out = open(out_path, "a", buffering=1)  # noqa: SIM115 - open for the server's whole life

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real gateway would offer

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            arrived = time.time()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            good = hmac.compare_digest(expected, self.headers.get("X-Signature", ""))
            try:
                data = json.loads(body)
            except ValueError:
                data, good = {}, False
            line = "\t".join([f"{arrived:.6f}", data.get("id", "") if good else "BAD",
                              self.headers.get("Idempotency-Key", ""), data.get("link", "")])
            with lock:
                out.write(line + "\n")
            status = 200 if good else 401
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args) -> None:  # no access log
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2], sys.argv[3])
