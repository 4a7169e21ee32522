"""The one guard on HTTP the service sends to an address a clinic's integration chose (issue 43): FHIR
Subscription endpoints and the webhook notice provider's URL. docs/security.md "Outbound requests".

A URL is checked where it is set (a typed 400) and again at every send, and the send goes to the address
that was checked:

- https only, unless ``EGRESS_ALLOW_HTTP`` (development and tests; off in production);
- no ``user:password@``; the host a DNS name or a canonical IP literal: ``2130706433``, ``0x7f.1``,
  ``127.1`` and ``017700000001`` are refused as spellings, since resolvers read them as 127.0.0.1;
- cloud metadata names and addresses are refused, whatever any allowlist says;
- the name is resolved and every address must be public: loopback, link-local, private (10/8, 172.16/12,
  192.168/16, 100.64/10), unique-local (fc00::/7), site-local, multicast, unspecified, reserved and
  documentation addresses are refused, IPv4-mapped, 6to4 and Teredo forms judged by the IPv4 they carry;
- unless the clinic's ADMIN-set allowlist (``clinic.settings["egress_allowlist"]``: host names and CIDRs,
  set with ``manage.py clinic_integration``) or the deployment's ``EGRESS_ALLOWLIST`` names the host or
  holds every address it resolves to: a hospital's EHR may well live on 10.x;
- the connection is opened to the address checked, with the name kept for ``Host`` and TLS (SNI and the
  certificate check), so a second DNS answer cannot move it (DNS rebinding); redirects are never followed;
- headers a subscriber may ask for are plain end-to-end ones: ``Cookie``, ``Host``, ``Transfer-Encoding``,
  ``Connection``, the other hop-by-hop headers, framing and proxy headers and ours are refused.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import certifi
import requests
import urllib3
from django.conf import settings

from .errors import ValidationFailed

#: Where a clinic's allowlist lives in ``Clinic.settings`` (a list of host names and CIDRs).
ALLOWLIST_KEY = "egress_allowlist"

#: Entries an allowlist may hold (each a host name or a CIDR; more is a typed 400).
ALLOWLIST_MAX = 20

#: Never a clinic's integration: the cloud providers' instance metadata, however it is spelled or allowed.
METADATA_NAMES = frozenset({
    "metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal",
    "metadata.azure.com", "metadata.tencentyun.com", "100-100-100-200.metadata",
})
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "169.254.169.123", "100.100.100.200", "fd00:ec2::254", "fd00:ec2::23",
))

#: Request headers a subscriber may not set: hop-by-hop (RFC 9110 7.6.1), framing, routing, credentials of
#: the browser or a proxy, and the ones the service sets itself.
FORBIDDEN_HEADERS = frozenset({
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    "proxy-authorization", "proxy-authenticate", "host", "content-length", "content-type", "expect", "cookie",
    "cookie2", "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip",
    "x-signature", "x-subscription", "x-notification", "idempotency-key",
})

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


class EgressRefused(ValidationFailed):
    """A target the guard refuses: a 400 where it is set; at a send, the delivery fails as ``BLOCKED``."""

    code = "EGRESS_REFUSED"


class HeaderRefused(ValidationFailed):
    code = "HEADER_REFUSED"


@dataclass(frozen=True)
class Target:
    """A checked URL: the name for ``Host`` and TLS, and the address to connect to."""

    scheme: str
    host: str
    port: int
    path: str
    address: ipaddress.IPv4Address | ipaddress.IPv6Address

    @property
    def host_header(self) -> str:
        name = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return name if self.port == default else f"{name}:{self.port}"


# --- the allowlist ---

Allowed = str | ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_allowlist(entries: Iterable[str], *, field: str = ALLOWLIST_KEY) -> list[Allowed]:
    """Host names (lower case, exact) and networks; a typed 400 naming ``field`` for anything else."""
    parsed: list[Allowed] = []
    for entry in entries:
        text = str(entry).strip().lower().rstrip(".")
        try:
            parsed.append(ipaddress.ip_network(text, strict=False))
            continue
        except ValueError:
            pass
        if not _is_dns_name(text):
            raise EgressRefused(f"{entry!r} is neither a host name nor a CIDR.", fields={field: ["invalid"]})
        parsed.append(text)
    if len(parsed) > ALLOWLIST_MAX:
        raise EgressRefused(f"At most {ALLOWLIST_MAX} entries.", fields={field: ["too many"]})
    return parsed


def allowlist_for(clinic_settings: Mapping | None) -> list[Allowed]:
    """The clinic's allowlist and the deployment's (``EGRESS_ALLOWLIST``)."""
    clinic_entries = (clinic_settings or {}).get(ALLOWLIST_KEY) or []
    return parse_allowlist([*getattr(settings, "EGRESS_ALLOWLIST", []), *clinic_entries])


def _allows(allow: list[Allowed], host: str, addresses: list) -> bool:
    if host in allow:
        return True
    networks = [n for n in allow if not isinstance(n, str)]
    return bool(addresses) and all(any(a.version == n.version and a in n for n in networks)
                                   for a in (_carried(address) for address in addresses))


# --- names and addresses ---

def _is_dns_name(host: str) -> bool:
    """A DNS name whose last label is not all digits (no TLD is, and resolvers read ``127.1`` or ``2130706433``
    as IPv4 addresses)."""
    labels = host.split(".")
    return (0 < len(host) <= 253 and all(_LABEL.match(label) for label in labels)
            and not labels[-1].isdigit() and not re.fullmatch(r"0x[0-9a-f]*", labels[-1]))


def _carried(address):
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo), else the address itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address.teredo is not None:
            return address.teredo[1]
        if address in ipaddress.ip_network("64:ff9b::/96"):  # NAT64's well-known prefix
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def is_public(address) -> bool:
    """An address a request may go to without an allowlist: global unicast and nothing else."""
    address = _carried(address)
    return not (address.is_private or address.is_loopback or address.is_link_local or address.is_multicast
                or address.is_unspecified or address.is_reserved or not address.is_global
                or getattr(address, "is_site_local", False))


def _resolve(host: str, port: int) -> list:
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise EgressRefused("The host does not resolve.", code="EGRESS_UNRESOLVED") from exc
    found = []
    for _family, _type, _proto, _name, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def check_url(url: str, allow: list[Allowed], *, field: str = "url") -> Target:
    """The ``Target`` to send to, or ``EgressRefused`` (a 400 naming ``field``) saying why not."""

    def refuse(detail: str, code: str = "EGRESS_REFUSED"):
        return EgressRefused(detail, code=code, fields={field: [detail]})

    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise refuse("Not a URL.") from None
    allowed_schemes = ("https", "http") if getattr(settings, "EGRESS_ALLOW_HTTP", False) else ("https",)
    if parts.scheme not in allowed_schemes:
        raise refuse(f"The scheme must be {' or '.join(allowed_schemes)}.", "EGRESS_SCHEME")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise refuse("No user or password in the URL.")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host or len(url) > 500:
        raise refuse("Not a URL.")
    port = port or (443 if parts.scheme == "https" else 80)
    if host in METADATA_NAMES:
        raise refuse("Cloud metadata is never a target.")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is None and not _is_dns_name(host):
        raise refuse("The host must be a DNS name or a plain IP address.")
    addresses = [literal] if literal is not None else _resolve(host, port)
    if any(_carried(a) in METADATA_ADDRESSES or a in METADATA_ADDRESSES for a in addresses):
        raise refuse("Cloud metadata is never a target.")
    if not _allows(allow, host, addresses) and not all(is_public(a) for a in addresses):
        raise refuse("The host resolves to an internal address; an ADMIN may allow it for this clinic "
                     "(manage.py clinic_integration --allow).", "EGRESS_INTERNAL")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, addresses[0])


def check_header_lines(lines: Iterable[str], *, field: str) -> list[str]:
    """``Name: value`` lines a subscriber may send; ``HeaderRefused`` (400 naming ``field``) for the others."""
    checked = []
    for line in lines:
        name, colon, value = str(line).partition(":")
        name = name.strip()
        if not colon or not re.fullmatch(r"[A-Za-z0-9-]{1,64}", name) or not re.fullmatch(
                r"[ \t]*[\x20-\x7e]{0,500}", value):
            raise HeaderRefused("A header is one 'Name: value' line of printable ASCII.", fields={field: ["invalid"]})
        if name.lower() in FORBIDDEN_HEADERS:
            raise HeaderRefused(f"{name} may not be set (hop-by-hop, framing, cookie or ours).",
                                fields={field: [f"{name}: refused"]})
        checked.append(f"{name}: {value.strip()}")
    return checked


def safe_headers(lines: Iterable[str]) -> dict[str, str]:
    """The stored lines as a dict, the forbidden ones left out (rows from before the guard)."""
    headers = {}
    for line in lines:
        name, _, value = str(line).partition(":")
        if name.strip() and name.strip().lower() not in FORBIDDEN_HEADERS:
            headers[name.strip()] = value.strip()
    return headers


# --- sending ---

_MANAGERS: dict[tuple[int, str | None], urllib3.PoolManager] = {}


def _environment_proxy(url: str) -> str | None:
    proxies = requests.utils.get_environ_proxies(url)
    return proxies.get(urllib.parse.urlsplit(url).scheme) or proxies.get("all")


def _manager(proxy: str | None) -> urllib3.PoolManager:
    """This process's pool manager (keep-alive per target address and name), through ``proxy`` if the
    environment names one for the URL (``HTTPS_PROXY`` with its ``user:password@``, ``NO_PROXY``), trusting
    ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` or certifi's CAs, as ``requests`` does. Keyed by process id: a
    connection opened before a worker pool forks is never shared by two children."""
    key = (os.getpid(), proxy)
    manager = _MANAGERS.get(key)
    if manager is None:
        if any(pid != key[0] for pid, _proxy in _MANAGERS):
            _MANAGERS.clear()
        ca_certs = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or certifi.where()
        if proxy:
            credentials = urllib.parse.urlsplit(proxy)
            headers = urllib3.make_headers(proxy_basic_auth=urllib.parse.unquote(
                f"{credentials.username}:{credentials.password or ''}")) if credentials.username else None
            manager = urllib3.ProxyManager(proxy, proxy_headers=headers, ca_certs=ca_certs, retries=False)
        else:
            manager = urllib3.PoolManager(ca_certs=ca_certs, retries=False)
        _MANAGERS[key] = manager
    return manager


def post(target: Target, *, body: bytes, headers: Mapping[str, str],
         timeout: urllib3.Timeout) -> urllib3.BaseHTTPResponse:
    """POST to the checked address (``Host`` and TLS name: ``target.host``); redirects are answers, never
    followed. Raises urllib3's errors (``NewConnectionError``, ``TimeoutError``, ``HTTPError``)."""
    url = f"{target.scheme}://{target.host_header}{target.path}"
    proxy = _environment_proxy(url)
    pool_kwargs = {"server_hostname": target.host, "assert_hostname": target.host} if target.scheme == "https" else {}
    pool = _manager(proxy).connection_from_host(str(target.address), target.port, target.scheme,
                                                pool_kwargs=pool_kwargs)
    address = f"[{target.address}]" if target.address.version == 6 else str(target.address)
    # A forwarding proxy (plain http) takes the absolute URL; pinned to the address there too.
    path = f"http://{address}:{target.port}{target.path}" if proxy and target.scheme == "http" else target.path
    return pool.urlopen("POST", path, body=body, headers={**headers, "Host": target.host_header}, redirect=False,
                        retries=False, timeout=timeout, assert_same_host=False, preload_content=True)


def failure_class(exc: BaseException | None = None, status: int | None = None) -> str:
    """The coarse class a failed send is told as to whoever set the target: never the peer's status code
    (a port-scan oracle), only UNREACHABLE, TIMEOUT, REJECTED (any answer but 2xx) or BLOCKED (the guard)."""
    if isinstance(exc, EgressRefused):
        return "BLOCKED"
    if isinstance(exc, urllib3.exceptions.NewConnectionError):  # refused, unreachable (a ConnectTimeoutError too)
        return "UNREACHABLE"
    if isinstance(exc, urllib3.exceptions.TimeoutError):
        return "TIMEOUT"
    if exc is not None:
        return "UNREACHABLE"
    return "REJECTED" if status is not None else "UNREACHABLE"
