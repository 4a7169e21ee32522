"""Claim and opt-out links and API tokens are bearer credentials: no log record may carry one (issue 16
part 1, issue 26 part 4).

``redact`` replaces the token in ``/claim/<token>``, ``/optout/<token>``, ``/standing/<token>``,
``/join/status/<token>`` and a text's short link ``/c/<code>`` (matched
after URL decoding, so ``/cl%61im/…`` and ``%2F`` or double-encoded spellings are caught too) and after
``Token``/``Bearer`` with a short digest (``sha256:<12 hex>``), enough
to correlate a support question with a log line, useless to open the page. It is applied to every
log record at creation (``install_record_factory``, from ``CommonConfig.ready``), so Django's request
log, gunicorn's error log, Celery and any third-party logger are covered, and explicitly by the
gunicorn access-log class (``config.gunicorn_logging``) and the ``console`` notification provider.
"""

from __future__ import annotations

import hashlib
import logging
import re
from urllib.parse import unquote

#: A bearer path segment: ``/claim/``, ``/optout/``, ``/standing/``, ``/join/status/`` and the token, up to a
#: separator a token cannot contain; and a text's short link ``/c/<code>``, only as the path's first segment (at
#: the start of a word, after ``=`` or the like, or right after ``scheme://host``), so ``/console/c/<clinic ref>``
#: and other paths with a ``c`` segment keep their refs. Matched case-insensitively and after URL decoding (below).
SECRET_PATH = re.compile(r"(?i)(/(?:claim|optout|standing|join/status)/|/c/)([^/\s?#\"'<>]+)")
#: What may stand right before a short link's ``/c/`` that is not a ``scheme://host``.
SHORT_LINK_AFTER = frozenset("=([,;:")
#: A URL scheme's characters (RFC 3986), read backwards from ``://``.
SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
HOST_STOPS = frozenset("/\"'<>")

#: An API token or scrape token written with its scheme (an Authorization header copied into a message).
AUTH_SCHEME = re.compile(r"(?i)\b(token|bearer)(\s+|%20|\+)([A-Za-z0-9._~+/=:-]{16,})")
#: One whitespace- or quote-separated run of text: the unit that is URL-decoded before matching.
WORD = re.compile(r"[^\s\"'<>]+")
#: Cheap test before any decoding: most log lines contain none of these.
MARKERS = ("%", "/claim", "/optout", "/standing", "/join/status", "/c/", "token", "bearer")
#: Decoding rounds: ``%2561`` (double encoding) needs two; more than this is not a path a server would route.
DECODE_ROUNDS = 4


def token_digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def _decoded(word: str) -> str:
    for _ in range(DECODE_ROUNDS):
        once = unquote(word)
        if once == word:
            break
        word = once
    return word


def _first_segment(text: str, at: int) -> bool:
    """Whether ``/c/`` at ``at`` starts a path: at the word's start, after ``=`` or the like, or right after
    ``scheme://host``. Read with ``rfind`` and one backward scan (a regular expression with the scheme in a
    lookbehind-free alternative rescanned every letter run from each position: quadratic in a long hostile word,
    on the log path)."""
    if at == 0 or text[at - 1] in SHORT_LINK_AFTER:
        return True
    sep = text.rfind("://", 0, at)
    if sep <= 0 or any(c in HOST_STOPS or c.isspace() for c in text[sep + 3:at]):
        return False
    start = sep
    while start > 0 and text[start - 1] in SCHEME_CHARS:
        start -= 1
    return start < sep and text[start].isalpha()


def _digest_path(match: re.Match) -> str:
    token = match.group(2)
    if token.startswith("sha256:") or (match.group(1) == "/c/" and not _first_segment(match.string, match.start())):
        return match.group(0)
    return match.group(1) + token_digest(token)


def _redact_word(match: re.Match) -> str:
    word = match.group(0)
    plain = _decoded(word) if "%" in word else word
    found = SECRET_PATH.finditer(plain)
    if not any(match.group(1) != "/c/" or _first_segment(plain, match.start()) for match in found):
        return word
    # The decoded form is what is written: the digest is of the token itself, however it was encoded,
    # so one link's lines match whatever spelling reached the server.
    return SECRET_PATH.sub(_digest_path, plain)


def _digest_auth(match: re.Match) -> str:
    secret = match.group(3)
    return match.group(0) if secret.startswith("sha256:") else f"{match.group(1)} {token_digest(secret)}"


def might_hold_secret(text: str) -> bool:
    lowered = text.lower()
    return any(marker in lowered for marker in MARKERS)


def redact(text: str) -> str:
    """``text`` with every claim and opt-out token (in any URL encoding, double encoding included) and
    every ``Token``/``Bearer`` credential replaced by its digest (idempotent)."""
    if not might_hold_secret(text):
        return text
    return AUTH_SCHEME.sub(_digest_auth, WORD.sub(_redact_word, text))


def _redact_value(value):
    return redact(value) if isinstance(value, str) else value


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """Redact the message template and its arguments (tuple or mapping) in place."""
    if isinstance(record.msg, str):
        record.msg = redact(record.msg)
    args = record.args
    if isinstance(args, dict):
        # In place: the mapping may be a dict subclass with its own lookup (gunicorn's SafeAtoms).
        changed = [(key, redact(value)) for key, value in args.items()
                   if isinstance(value, str) and might_hold_secret(value)]
        for key, value in changed:
            dict.__setitem__(args, key, value)
    elif isinstance(args, tuple):
        record.args = tuple(_redact_value(value) for value in args)
    return record


_installed = False


def install_record_factory() -> None:
    """Wrap the process's LogRecord factory once so every record is redacted where it is made."""
    global _installed
    if _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        return redact_record(previous(*args, **kwargs))

    logging.setLogRecordFactory(factory)
    _installed = True
