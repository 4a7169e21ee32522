"""Issue 43: the egress guard (common/egress.py) on targets a clinic's integration chooses. The probe's
internal targets are refused; an ADMIN's allowlist lets a host or network in (never cloud metadata); the
connection goes to the address that was checked, whatever DNS says next; redirects are not followed. The
loopback receivers are real servers; only the resolver's answer for a made-up name is set by the test."""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3

from common import egress
from tests.support.servers import http_receiver

TIMEOUT = urllib3.Timeout(connect=2, read=2)


@pytest.fixture(autouse=True)
def no_deployment_allowlist(settings):
    """The suite allows its loopback receivers (tests/conftest.py); these tests start from nothing allowed."""
    settings.EGRESS_ALLOWLIST = []
    settings.EGRESS_ALLOW_HTTP = True


@pytest.fixture
def resolver(monkeypatch):
    """Names the test makes up resolve to the addresses it says (``answers[name]``); everything else, IP
    literals included, goes to the real resolver."""
    answers: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port or 0))
                    for a in answers[host]]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


# The probe's targets (issue 43) and their relatives: each refused without an allowlist.
INTERNAL = [
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://172.16.0.1/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://[::1]:5432/",
    "http://0.0.0.0:6379/",
    "http://[::]:6379/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://127.1/",
    "http://017700000001/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[2002:7f00:1::]/",  # 6to4 carrying 127.0.0.1
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://100.64.0.1/",
    "http://127.0.0.1:8000/",
    "http://localhost:8000/",
]


@pytest.mark.parametrize("url", INTERNAL)
def test_an_internal_target_is_refused_without_an_allowlist(url):
    with pytest.raises(egress.EgressRefused) as refused:
        egress.check_url(url, [], field="channel.endpoint")
    assert refused.value.status_code == 400 and list(refused.value.fields) == ["channel.endpoint"]


def test_a_name_resolving_to_the_metadata_address_is_refused(resolver):
    resolver["169.254.169.254.nip.io"] = ["169.254.169.254"]
    with pytest.raises(egress.EgressRefused):
        egress.check_url("https://169.254.169.254.nip.io/latest/meta-data/", [])


def test_a_name_with_one_internal_address_among_public_ones_is_refused(resolver):
    resolver["ehr.example.org"] = ["93.184.216.34", "10.0.0.7"]
    with pytest.raises(egress.EgressRefused):
        egress.check_url("https://ehr.example.org/hook", [])


def test_a_public_address_passes_and_is_the_one_pinned(resolver):
    resolver["ehr.example.org"] = ["93.184.216.34"]
    target = egress.check_url("https://ehr.example.org/fhir/hook?x=1", [])
    assert (target.host, target.port, target.path, str(target.address)) == (
        "ehr.example.org", 443, "/fhir/hook?x=1", "93.184.216.34")


def test_plain_http_is_refused_in_production(settings):
    settings.EGRESS_ALLOW_HTTP = False
    with pytest.raises(egress.EgressRefused) as refused:
        egress.check_url("http://93.184.216.34/hook", [])
    assert refused.value.code == "EGRESS_SCHEME"


@pytest.mark.parametrize("url", ["ftp://93.184.216.34/", "https://user:pw@93.184.216.34/", "https:///x",
                                 "https://[fe80::1%25eth0]/"])
def test_other_schemes_credentials_and_odd_hosts_are_refused(url):
    with pytest.raises(egress.EgressRefused):
        egress.check_url(url, [])


def test_an_allowlisted_network_lets_an_internal_host_in():
    allow = egress.parse_allowlist(["10.0.0.0/8"])
    assert str(egress.check_url("https://10.20.30.40/fhir", allow).address) == "10.20.30.40"
    assert str(egress.check_url("https://[::ffff:10.1.2.3]/fhir", allow).address) == "::ffff:a01:203"
    with pytest.raises(egress.EgressRefused):
        egress.check_url("https://192.168.1.1/", allow)


def test_an_allowlisted_host_name_is_let_in_whatever_it_resolves_to(resolver):
    resolver["ehr.hospital.internal"] = ["10.9.8.7"]
    allow = egress.parse_allowlist(["EHR.hospital.internal."])
    assert str(egress.check_url("https://ehr.hospital.internal/", allow).address) == "10.9.8.7"


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/"])
def test_cloud_metadata_is_refused_even_when_allowlisted(url, resolver):
    resolver["metadata.google.internal"] = ["169.254.169.254"]
    allow = egress.parse_allowlist(["169.254.0.0/16", "metadata.google.internal"])
    with pytest.raises(egress.EgressRefused):
        egress.check_url(url, allow)


@pytest.mark.parametrize("entry", ["not a host", "10.0.0.0/33", "http://x/", "127.1"])
def test_an_allowlist_entry_that_is_neither_host_nor_cidr_is_refused(entry):
    with pytest.raises(egress.EgressRefused):
        egress.parse_allowlist([entry])


def test_the_deployment_allowlist_and_the_clinics_are_read_together(settings):
    settings.EGRESS_ALLOWLIST = ["192.168.0.0/16"]
    allow = egress.allowlist_for({"egress_allowlist": ["10.0.0.0/8"]})
    egress.check_url("https://192.168.1.1/", allow)
    egress.check_url("https://10.0.0.1/", allow)


def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(resolver):
    """DNS rebinding: the name resolves to the allowed loopback receiver when checked, then elsewhere; the
    POST still goes to the address checked and names the host in ``Host``."""
    with http_receiver() as (url, seen):
        port = int(url.rsplit(":", 1)[1])
        resolver["ehr.hospital.test"] = ["127.0.0.1"]
        target = egress.check_url(f"http://ehr.hospital.test:{port}/hook", egress.parse_allowlist(["127.0.0.1/32"]))
        resolver["ehr.hospital.test"] = ["10.255.255.1"]  # the second answer: an internal address
        response = egress.post(target, body=b"{}", headers={"Content-Type": "application/json"}, timeout=TIMEOUT)
    assert response.status == 200
    assert seen[0]["headers"]["Host"] == f"ehr.hospital.test:{port}" and seen[0]["path"] == "/hook"


@contextmanager
def redirecting_receiver(location: str):
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's hook name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hits.append(self.path)
            self.send_response(307)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def test_a_redirect_is_an_answer_not_followed():
    with http_receiver() as (inner, seen), redirecting_receiver(f"{inner}/internal") as (outer, hits):
        target = egress.check_url(f"{outer}/hook", egress.parse_allowlist(["127.0.0.1/32"]))
        response = egress.post(target, body=b"{}", headers={}, timeout=TIMEOUT)
    assert response.status == 307 and hits == ["/hook"] and seen == []
    assert egress.failure_class(status=response.status) == "REJECTED"


@pytest.mark.parametrize("line", ["Cookie: session=abc", "Host: 10.0.0.1", "Transfer-Encoding: chunked",
                                  "Connection: keep-alive, X-Signature", "Keep-Alive: timeout=5", "TE: trailers",
                                  "Upgrade: h2c", "Proxy-Authorization: Basic eDp5", "Trailer: X",
                                  "Content-Length: 0", "X-Signature: forged", "cookie: a=b"])
def test_hop_by_hop_framing_cookie_and_our_headers_are_refused(line):
    with pytest.raises(egress.HeaderRefused) as refused:
        egress.check_header_lines([line], field="channel.header")
    assert refused.value.status_code == 400 and refused.value.code == "HEADER_REFUSED"


def test_an_end_to_end_header_such_as_authorization_is_kept():
    """FHIR's own example of ``channel.header`` is the subscriber's ``Authorization``: it authenticates us to
    the endpoint the credential chose, which the address checks keep outside the service's network."""
    assert egress.check_header_lines(["Authorization: Bearer ehr-secret", "X-Tenant:  a"], field="h") == [
        "Authorization: Bearer ehr-secret", "X-Tenant: a"]


def test_failures_are_told_by_class_never_by_status():
    assert {egress.failure_class(status=s) for s in (301, 401, 404, 500, 503)} == {"REJECTED"}
    assert egress.failure_class(egress.EgressRefused()) == "BLOCKED"
    assert egress.failure_class(urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out")) == "TIMEOUT"
    assert egress.failure_class(urllib3.exceptions.NewConnectionError(None, "refused")) == "UNREACHABLE"
