"""The client's address, honest behind proxies (issue 16 part 1).

``X-Forwarded-For`` is written by whoever sends the request, so it is read only when the direct
peer (``REMOTE_ADDR``) is a configured proxy: ``TRUSTED_PROXIES`` (addresses or CIDR networks) or
``NUM_PROXIES`` (that many proxies in front, each appending the address it saw). Both are off by
default, and then the address is ``REMOTE_ADDR`` whatever the headers say. Every reader of client
addresses (API throttles, the sign-in throttle, the CRM intake's quarantine bound) goes through here.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings


@lru_cache(maxsize=8)
def _networks(spec: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in spec if item.strip())


def _is_trusted(address: str, networks: tuple) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(meta) -> str:
    """The address of the client that sent this request (``request.META``-like mapping)."""
    remote = (meta.get("REMOTE_ADDR") or "").strip()
    forwarded = [part.strip() for part in (meta.get("HTTP_X_FORWARDED_FOR") or "").split(",") if part.strip()]
    networks = _networks(tuple(getattr(settings, "TRUSTED_PROXIES", ()) or ()))
    if networks:
        if not forwarded or not _is_trusted(remote, networks):
            return remote
        # Walk from the nearest hop outwards; the first address not ours is the client.
        for hop in reversed(forwarded):
            if not _is_trusted(hop, networks):
                return hop
        return forwarded[0]
    count = int(getattr(settings, "NUM_PROXIES", 0) or 0)
    if count > 0 and forwarded:
        return forwarded[-min(count, len(forwarded))]
    return remote
