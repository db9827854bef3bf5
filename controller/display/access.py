"""Who may see the pages and who may act on the table (docs/display.md "Access").

Two rules, both decided from the TCP peer address (``request.remote``; forwarding headers such as
``X-Forwarded-For`` are never trusted, since anyone can send them):

* **Viewing** (pages, JSON, the live stream): any loopback client; a remote client only with the
  supervisor token from the config, as ``Authorization: Bearer <token>`` or ``?token=<token>``.
  No token presented: 401. A wrong token, or no token configured at all: 403.
* **Dealer input** (dice, seats, a player's setting, void): the kiosk on the table computer,
  i.e. a loopback client, unless the service is told to accept remote dealer input (then a
  remote client needs the token too).

Loopback clients must also name a loopback host (or the configured one) in ``Host``, so a web
page elsewhere cannot reach the table through DNS rebinding; and a state-changing request that
carries an ``Origin`` must come from this server's own origin (no cross-site form posts).
"""

from __future__ import annotations

import hmac
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


def _host_name(host_header: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8080`` → ``::1``, ``a:80`` → ``a``)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


def presented_token(request: web.BaseRequest) -> str | None:
    """The token a client sent: the Bearer credentials, else the ``token`` query parameter."""
    auth = request.headers.get("Authorization", "")
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    token = request.query.get("token")
    return token or None


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The access rules of one display server."""

    token: str | None = None
    configured_host: str = "127.0.0.1"
    remote_dealer_input: bool = False

    def host_allowed(self, host_header: str | None) -> bool:
        """A loopback client must address the server by a loopback name or address, or by the
        configured host (a ``Host`` naming some other site is a DNS-rebinding attempt)."""
        if not host_header:
            return False
        name = _host_name(host_header)
        if name in LOOPBACK_NAMES or name == self.configured_host.lower():
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True  # an address literal cannot be rebound

    def _token_ok(self, presented: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(presented.encode("utf-8"), self.token.encode("utf-8"))

    def _remote(self, request: web.BaseRequest) -> Decision:
        presented = presented_token(request)
        if self.token is None:
            return Decision(
                403, "remote access is disabled: no supervisor token is configured on this table"
            )
        if presented is None:
            return Decision(401, "remote access needs the supervisor token")
        if not self._token_ok(presented):
            return Decision(403, "wrong supervisor token")
        return ALLOW

    def can_view(self, request: web.BaseRequest) -> Decision:
        """May this client see the pages, the JSON endpoints and the live stream?"""
        if is_loopback_address(request.remote):
            if not self.host_allowed(request.headers.get("Host")):
                return Decision(403, "unexpected Host header")
            return ALLOW
        return self._remote(request)

    def can_act(self, request: web.BaseRequest) -> Decision:
        """May this client send dealer input (dice, seats, a player's setting, void)?"""
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            return Decision(403, "dealer input from another site is refused")
        if is_loopback_address(request.remote):
            return self.can_view(request)
        if not self.remote_dealer_input:
            return Decision(403, "dealer input is accepted only on the table computer (loopback)")
        return self._remote(request)

    def dealer_input_for(self, request: web.BaseRequest) -> bool:
        """What the page should offer this client: True when its dealer input would be accepted."""
        return self.can_act(request).allowed
