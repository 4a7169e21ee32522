"""Gunicorn access logging for `make run`: console polls stay out of the terminal.

The console re-renders its counters and lists every few seconds; logging each poll would bury the
lines that matter. A poll is a GET carrying ``X-Console-Poll`` (set by the polling elements) or
one answered ``304 Not Modified``; everything else is logged as usual.
"""

from __future__ import annotations

from gunicorn.glogging import Logger


def is_console_poll(environ: dict, status: str) -> bool:
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        return False
    return bool(environ.get("HTTP_X_CONSOLE_POLL")) or str(status).startswith("304")


class QuietPollLogger(Logger):
    def access(self, resp, req, environ, request_time):
        if is_console_poll(environ, getattr(resp, "status", "")):
            return
        super().access(resp, req, environ, request_time)
