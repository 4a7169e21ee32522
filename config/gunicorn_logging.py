"""Gunicorn's access log for ``make run`` (passed as ``--logger-class``): no claim tokens, no console polls.

The request line, path, query, URI and referer atoms may all carry ``/claim/<token>`` (the claim
page's own assets are fetched with it as the referer); each string atom is redacted to a digest.
The console re-renders its counters and lists every few seconds; logging each poll would bury the
lines that matter. A poll is a GET carrying ``X-Console-Poll`` (set by the polling elements) or one
answered ``304 Not Modified``; everything else is logged.
"""

from __future__ import annotations

from gunicorn.glogging import Logger

from common.redaction import redact


def is_console_poll(environ: dict, status: str) -> bool:
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        return False
    return bool(environ.get("HTTP_X_CONSOLE_POLL")) or str(status).startswith("304")


class RedactingLogger(Logger):
    def access(self, resp, req, environ, request_time):
        if is_console_poll(environ, getattr(resp, "status", "")):
            return
        super().access(resp, req, environ, request_time)

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        return {key: redact(value) if isinstance(value, str) else value for key, value in atoms.items()}
