"""Who may reach the pit page and change anything through it (issue 30).

- **Host**: every request (GETs too) must name an allowed host — the loopback names, the address
  the page listens on, and ``[web] allowed_hosts`` — so a page of another site whose name was
  made to resolve to the pit (DNS rebinding) is refused.
- **Same-origin JSON**: every state-changing request (POST) must be ``application/json`` and
  come from the page's own origin (``Origin`` equal to the request's host, or one of ``[web]
  allowed_origins``); without an ``Origin`` only a program with the bearer token may change
  anything (a browser never sends that header across sites). A cross-site form or ``no-cors``
  fetch is refused before it is read.
- **Sessions**: a random id in an HttpOnly, SameSite=Strict cookie (``Secure`` when the page is
  served over TLS or behind a proxy saying ``X-Forwarded-Proto: https``), only its SHA-256 kept
  in the database (``web_sessions``), so it outlives a restart, ends at logout (revoked
  server-side) and with any change of the access token.
- **Supervisors**: acknowledging takes a supervisor's badge and PIN, checked against ``[commands]
  supervisors_file`` — the table's own format and policy (PBKDF2, the same constant work for an
  unknown badge, a doubling lockout per source): ``controller.badges.BadgeBook``. The Host and
  loopback rules are the table's display's own (``controller.http_rules``).

What it does not protect against: someone on the pit's own machine with its files, a browser
extension acting inside the page, a PIN watched over a supervisor's shoulder, a TLS proxy that
forwards any Host (configure it to pass only the pit's name).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from controller.badges import BadgeBook, read_supervisors
from controller.http_rules import LOOPBACK_NAMES, host_name, is_loopback_host
from pit.config import PitConfigError

#: The Host names a loopback client may use whatever the config says.
LOOPBACK_HOSTS = LOOPBACK_NAMES | {"127.0.0.1", "::1"}
#: Seconds a checked session is trusted without asking the database again (a revocation by
#: another pit sharing the database takes this long to reach this one).
SESSION_CACHE_S = 5.0


@dataclass(frozen=True)
class Origins:
    """The hosts the page answers to and the origins a change may come from."""

    hosts: frozenset[str]
    origins: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, listen: str, allowed_hosts: Iterable[str], allowed_origins: Iterable[str]
    ) -> Origins:
        hosts = {h.lower().strip("[]") for h in allowed_hosts}
        if not is_loopback_host(listen) and not hosts:
            raise PitConfigError(
                f"[web] host = {listen!r} is not a loopback address: set allowed_hosts (the "
                "names the page is reached by)"
            )
        if listen not in ("0.0.0.0", "::", ""):
            hosts.add(listen.lower().strip("[]"))
        hosts |= LOOPBACK_HOSTS
        return cls(frozenset(hosts), frozenset(o.rstrip("/").lower() for o in allowed_origins))

    def host_allowed(self, request: web.Request) -> bool:
        return host_name(request.headers.get("Host", "")) in self.hosts

    def change_problem(self, request: web.Request, bearer: bool) -> tuple[int, str] | None:
        """Why a state-changing request is refused (status, reason), or None."""
        if request.content_type != "application/json":
            return 415, "a change is sent as application/json"
        origin = request.headers.get("Origin")
        if origin is None:
            return None if bearer else (403, "a change needs the page's own Origin")
        origin = origin.rstrip("/").lower()
        scheme, sep, netloc = origin.partition("://")
        own = request.headers.get("Host", "").lower()
        if origin in self.origins or (sep and scheme in ("http", "https") and netloc == own):
            return None
        return 403, "a change from another origin is refused"


def session_id() -> str:
    return secrets.token_urlsafe(32)


def session_hash(cookie: str) -> str:
    return hashlib.sha256(b"pit-session\n" + cookie.encode("utf-8", "replace")).hexdigest()


def token_tag(token: str) -> str:
    """Names the access token a session was made under (a new token ends the old sessions)."""
    return hashlib.sha256(b"pit-token-tag\n" + token.encode()).hexdigest()[:32]


@dataclass
class SessionCache:
    """Sessions checked lately (hash → (expires, checked at)); forgotten on logout."""

    entries: dict[str, tuple[float, float]] = field(default_factory=dict)

    def fresh(self, key: str, now: float) -> bool:
        entry = self.entries.get(key)
        return entry is not None and entry[0] > now and now - entry[1] < SESSION_CACHE_S

    def remember(self, key: str, expires: float, now: float) -> None:
        if len(self.entries) > 10_000:
            self.entries.clear()
        self.entries[key] = (expires, now)

    def forget(self, key: str) -> None:
        self.entries.pop(key, None)


def supervisors_book(path: Path | None) -> BadgeBook | None:
    """The supervisors' book from ``[commands] supervisors_file`` (None: not configured)."""
    if path is None:
        return None
    try:
        if path.stat().st_mode & 0o007:
            raise PitConfigError(f"{path}: readable by everyone; chmod 0640 (root:paigow-pit)")
        return BadgeBook(read_supervisors(path))
    except (OSError, ValueError) as exc:
        raise PitConfigError(f"[commands] supervisors_file: {exc}") from None


def secure(request: web.Request) -> bool:
    """Whether the page is served over TLS (itself, or a proxy in front saying so)."""
    return request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"
