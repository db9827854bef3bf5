"""Who may see the pages and who may act on the table (docs/display.md "Access").

Two rules, both decided from the TCP peer address (``request.remote``; forwarding headers such as
``X-Forwarded-For`` are never trusted, since anyone can send them):

* **Viewing** (pages, JSON, the live stream): any loopback client; a remote client only with the
  supervisor token from the config, as ``Authorization: Bearer <token>``, or with the session
  cookie a login (``POST /api/login`` with the token in its JSON body) set. Never in the URL: a
  query string ends up in histories, bookmarks and proxies' logs. No credential: 401. A wrong
  token, or no token configured at all: 403.
* **Dealer input** (dice, seats, a player's setting, void): the kiosk on the table computer,
  i.e. a loopback client, unless the config accepts remote dealer input
  (``[display] remote_dealer_input``; then a remote client needs the token too).

Neither rule gives the kiosk anything the table computer's other programs lack: the kiosk's
credential (kiosk.py, a cookie only the holder of the kiosk token gets) is asked only by the
limits (guard.py), to keep the kiosk served under a flood from that same address.

Every client, loopback or remote, for every path (static files too), must also name in ``Host``
a loopback name, an address, the configured host or one of ``[display] allowed_hosts``, and the
port the server listens on if it names a port, so a web page elsewhere cannot reach the table
through DNS rebinding (the server's middleware asks :meth:`AccessPolicy.host_allowed` first); and
a request that changes anything
must carry an ``Origin`` naming this server's own origin (a browser sends it with every POST;
a cross-site form or a ``no-cors`` fetch cannot forge it).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from controller.display.kiosk import KIOSK_COOKIE, KioskKey
from controller.http_rules import (
    ALLOW,
    LOOPBACK_NAMES,
    Decision,
    host_and_port,
    is_loopback_address,
    own_origin,
    presented_token,
)

#: The cookie a supervisor's login sets (HttpOnly, SameSite=Strict): a session id, not the token.
SESSION_COOKIE = "paigow_supervisor"
SESSION_S = 12 * 3600
MAX_SESSIONS = 256


@dataclass
class Sessions:
    """Supervisors' logins: random ids, each valid ``lifetime`` seconds from the login (kept in
    memory: a restart of the controller asks for the token again). At most ``MAX_SESSIONS``;
    a new one beyond that ends the oldest."""

    lifetime: float = SESSION_S
    clock: Callable[[], float] = time.monotonic
    _expires: dict[str, float] = field(default_factory=dict)

    def open(self) -> str:
        now = self.clock()
        self._expires = {k: t for k, t in self._expires.items() if t > now}
        while len(self._expires) >= MAX_SESSIONS:
            del self._expires[next(iter(self._expires))]
        session = secrets.token_urlsafe(32)
        self._expires[session] = now + self.lifetime
        return session

    def valid(self, session: str | None) -> bool:
        expires = self._expires.get(session) if session else None
        if expires is None:
            return False
        if expires <= self.clock():
            self._expires.pop(session or "", None)
            return False
        return True

    def close(self, session: str | None) -> None:
        if session:
            self._expires.pop(session, None)


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The access rules of one display server."""

    token: str | None = None
    configured_host: str = "127.0.0.1"
    remote_dealer_input: bool = False
    #: Further names the server may be addressed by (``[display] allowed_hosts``), lower-case.
    allowed_hosts: frozenset[str] = frozenset()
    sessions: Sessions = field(default_factory=Sessions, compare=False, repr=False)
    kiosk: KioskKey = field(default_factory=KioskKey, compare=False, repr=False)

    def host_allowed(self, host_header: str | None, local_port: int | None = None) -> bool:
        """Every client must address the server by a loopback name, an address, the configured
        host or one of ``allowed_hosts``, and by the port it listens on (``local_port``, when
        known) if it names one: a ``Host`` naming some other site is a DNS-rebinding attempt."""
        if not host_header:
            return False
        name, port = host_and_port(host_header)
        if port is not None and local_port is not None and port != local_port:
            return False
        if (
            name in LOOPBACK_NAMES
            or name == self.configured_host.lower()
            or name in self.allowed_hosts
        ):
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True  # an address literal cannot be rebound

    def token_ok(self, presented: str) -> bool:
        """The supervisor token, compared in constant time (False when none is configured)."""
        if self.token is None:
            return False
        return hmac.compare_digest(presented.encode("utf-8"), self.token.encode("utf-8"))

    def _remote(self, request: web.BaseRequest) -> Decision:
        if self.token is None:
            return Decision(
                403, "remote access is disabled: no supervisor token is configured on this table"
            )
        presented = presented_token(request)
        if presented is not None:
            return ALLOW if self.token_ok(presented) else Decision(403, "wrong supervisor token")
        if self.sessions.valid(request.cookies.get(SESSION_COOKIE)):
            return ALLOW
        return Decision(
            401,
            "remote access needs the supervisor token: sign in on the page, "
            "or send it as Authorization: Bearer",
        )

    def is_kiosk(self, request: web.BaseRequest) -> bool:
        """Does this request carry the kiosk's credential (its cookie, from loopback)? Asked
        by the limits only: it never lets anything through that would otherwise be refused."""
        return is_loopback_address(request.remote) and self.kiosk.cookie_ok(
            request.cookies.get(KIOSK_COOKIE)
        )

    def same_origin(self, request: web.BaseRequest) -> Decision:
        """A request that changes anything must name this server's origin in ``Origin``: a
        browser sends it with every POST, and a page elsewhere cannot make it say ours."""
        origin = request.headers.get("Origin")
        if origin is None:
            return Decision(403, "a request that changes anything must carry its page's Origin")
        if origin.lower() != own_origin(request):
            return Decision(403, "a request from another site is refused")
        return ALLOW

    def can_view(self, request: web.BaseRequest) -> Decision:
        """May this client see the pages, the JSON endpoints and the live stream?"""
        if is_loopback_address(request.remote):
            if not self.host_allowed(request.headers.get("Host")):
                return Decision(403, "unexpected Host header")
            return ALLOW
        return self._remote(request)

    def can_log_in(self, request: web.BaseRequest) -> Decision:
        """May this client try the supervisor token (``POST /api/login``)? Anyone who may reach
        the server, from a page of its own origin; the handler checks the token."""
        same = self.same_origin(request)
        if not same.allowed:
            return same
        if is_loopback_address(request.remote):
            return self.can_view(request)
        return ALLOW

    def can_act(self, request: web.BaseRequest) -> Decision:
        """May this client send dealer input (dice, seats, a player's setting, void)?"""
        same = self.same_origin(request)
        if not same.allowed:
            return same
        return self._client_may_act(request)

    def _client_may_act(self, request: web.BaseRequest) -> Decision:
        if is_loopback_address(request.remote):
            return self.can_view(request)
        if not self.remote_dealer_input:
            return Decision(403, "dealer input is accepted only on the table computer (loopback)")
        return self._remote(request)

    def dealer_input_for(self, request: web.BaseRequest) -> bool:
        """What the page should offer this client (asked by its GET, which carries no Origin):
        True when its dealer input, posted by the page, would be accepted."""
        return self._client_may_act(request).allowed
