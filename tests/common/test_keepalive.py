"""Issue 26 part 7: a request refused before its body is read (401/403/404 with a 100 KB body) does not break
the next request on the same keep-alive connection under gunicorn's threaded worker (``make run``): the
app drains the unread body (common/middleware.py), so gunicorn need not give up on the connection."""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

import pytest

from tests.support.processes import gunicorn


@pytest.fixture(scope="module")
def server():
    with gunicorn({}, workers=1, threads=2) as base:
        parts = urlsplit(base)
        yield parts.hostname, parts.port


def _two_requests(address, first: bytes) -> list[bytes]:
    """Send ``first`` then ``GET /healthz`` on one connection; the status lines that came back."""
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(first + b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data = b""
        try:
            while data.count(b"HTTP/1.1 ") < 2:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            pass
    return re.findall(rb"HTTP/1\.1 \d{3}", data)


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/v1/clinics/cl_x/appointments/", b"401"),  # no token
        ("/console/c/cl_x/controls/switch/", b"403"),  # no CSRF token
        ("/no-such-page/", b"404"),
    ],
)
def test_a_refused_100_kb_body_leaves_the_connection_usable(server, path, status):
    body = b"x" * 100_000
    first = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    answers = _two_requests(server, first)
    assert len(answers) == 2, answers
    assert status in answers[0] and b"200" in answers[1]


def _response_head(address, request: bytes) -> bytes:
    """The status line and headers of the first answer to ``request`` on a fresh connection."""
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n\r\n", 1)[0]


@pytest.mark.parametrize("path", ["/api/v1/clinics/cl_x/appointments/", "/console/c/cl_x/controls/switch/"])
def test_a_413_says_connection_close(server, path):
    """A body over the limit is not read (nor drained), so the server ends the connection after its 413: the
    answer must say so, or the client sends its next request into a connection about to close (issue 43)."""
    declared = 3 * 1024 * 1024  # over DATA_UPLOAD_MAX_MEMORY_SIZE (Django's 2.5 MB)
    head = _response_head(server, (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    ).encode() + b"x" * 65536)
    lines = head.split(b"\r\n")
    assert b" 413 " in lines[0], lines[0]
    assert b"connection: close" in [line.lower() for line in lines[1:]], head


def _chunked(size: int) -> bytes:
    chunk = b"x" * 8192
    return b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(size // len(chunk))) + b"0\r\n\r\n"


@pytest.mark.parametrize(("path", "status"), [("/api/v1/clinics/cl_x/appointments/", b"401"),
                                              ("/no-such-page/", b"404")])
def test_a_chunked_body_says_connection_close(server, path, status):
    """Django reads a body by its Content-Length only, so a chunked one is left on the socket and the server ends
    the connection after answering: the answer must say so (it said keep-alive, and the next request was lost)."""
    head = _response_head(server, (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode() + _chunked(100_000))
    lines = head.split(b"\r\n")
    assert status in lines[0], lines[0]
    assert b"connection: close" in [line.lower() for line in lines[1:]], head
