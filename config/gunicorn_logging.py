"""Gunicorn's access log without claim tokens: ``make run`` passes ``--logger-class`` for this class.

The request line, path, query, URI and referer atoms all may carry ``/claim/<token>`` (the claim
page's own assets are fetched with it as the referer); each string atom is redacted to a digest.
"""

from __future__ import annotations

from gunicorn.glogging import Logger

from common.redaction import redact


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        return {key: redact(value) if isinstance(value, str) else value for key, value in atoms.items()}
