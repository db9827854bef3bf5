"""The web-access rules both pages share, the table's display (``controller.display.access``)
and the pit's page (``pit.access``, ``pit.gate``): which peer is loopback, what a ``Host`` header
names, the token a client presents, a page's own origin, and a check's :class:`Decision`.

What they do not protect against: anything on the machine itself (a loopback peer is trusted
as far as each page's policy says), a proxy that rewrites ``Host`` or forwards every client
from its own loopback address (configure it to pass only the page's names), a token read off
the machine's files.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


@dataclass(frozen=True, slots=True)
class Decision:
    """``status`` 200 lets the request through; otherwise it is the HTTP status to answer."""

    status: Literal[200, 401, 403]
    reason: str = ""
    #: Why a PIN check refused, as journaled (wrong_pin, locked_out, disabled).
    code: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


ALLOW = Decision(200)


def is_loopback_address(remote: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and IPv4-mapped loopback; False for anything else or unknown."""
    if not remote:
        return False
    try:
        address = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def host_name(host_header: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8080`` → ``::1``, ``a:80`` → ``a``)."""
    return host_and_port(host_header)[0]


def host_and_port(host_header: str) -> tuple[str, int | None]:
    """A ``Host`` header's name and port (None when it names none; -1 when it is no port)."""
    host = host_header.strip().lower()
    port = ""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
    elif host.count(":") == 1:
        name, port = host.split(":", 1)
    else:
        name = host
    if not port:
        return name, None
    return name, int(port) if port.isdigit() and len(port) <= 5 else -1


def presented_token(request: web.BaseRequest) -> str | None:
    """The token a client sent as Bearer credentials (a ``token`` in the URL is not one)."""
    auth = request.headers.get("Authorization", "")
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None


def own_origin(request: web.BaseRequest) -> str:
    """The origin a page of this server has, as the browser names it in ``Origin``."""
    return f"{request.scheme}://{request.host}".lower()


def is_loopback_host(name: str) -> bool:
    """Whether a host name or address (a listen address, a ``Host`` header's name) is this
    machine's: a loopback name, or a loopback address."""
    name = name.strip().lower().strip("[]")
    return name in LOOPBACK_NAMES or is_loopback_address(name)
