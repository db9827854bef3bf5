"""Who may use the pit page, and how (``pit.access`` holds the pieces): the middleware every
request passes (an allowed Host, no token in an address, same-origin JSON for a change, a
session or a bearer token), the login and logout that make and end a server-side session, and
the supervisor's badge and PIN a command from the page takes. Tokens, PINs and sessions are
never logged."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from controller.http_rules import is_loopback_address, is_loopback_host
from pit.access import (
    Origins,
    SessionCache,
    secure,
    session_hash,
    session_id,
    supervisors_book,
    token_tag,
)
from pit.config import PitConfig, PitConfigError, read_secret
from pit.judge import escaped
from pit.metrics import HEALTH_PATHS, MACHINE_PATHS
from pit.pagedb import PageDatabase

log = logging.getLogger("pit.web")

SESSION_COOKIE = "pit_session"
SESSION_S = 12 * 3600
#: Paths anyone who reached an allowed Host may ask for: the login and the page's look.
OPEN_PATHS = ("/login", "/api/login", "/static/")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Gate:
    def __init__(self, config: PitConfig, database: PageDatabase) -> None:
        self.database = database
        self.token: str | None = None
        if config.web.token_file is not None:
            self.token = read_secret(config.web.token_file)
        elif not is_loopback_host(config.web.host):
            raise PitConfigError(
                f"[web] host = {config.web.host!r} is not a loopback address: set token_file"
            )
        self.origins = Origins.of(
            config.web.host, config.web.allowed_hosts, config.web.allowed_origins
        )
        self.supervisors = supervisors_book(config.commands.supervisors_file)
        self.sessions = SessionCache()
        self.tag = token_tag(self.token) if self.token is not None else ""
        self.refused = 0  # requests refused by the Host or same-origin checks

    def bearer(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        return (
            self.token is not None
            and header.startswith("Bearer ")
            and hmac.compare_digest(header[7:].strip().encode(), self.token.encode())
        )

    async def authorized(self, request: web.Request) -> bool:
        if self.token is None or self.bearer(request):
            return True
        return await self._session_ok(request.cookies.get(SESSION_COOKIE, ""))

    async def _session_ok(self, cookie: str) -> bool:
        if not cookie or len(cookie) > 128:
            return False
        key, now = session_hash(cookie), time.time()
        if self.sessions.fresh(key, now):
            return True
        expires = await self.database.call(lambda s: s.sessions.session_expires(key, self.tag, now))
        if expires is None:
            self.sessions.forget(key)
            return False
        self.sessions.remember(key, expires, now)
        return True

    def refuse(self, request: web.Request, status: int, reason: str) -> web.Response:
        self.refused += 1
        log.warning("pit_request_refused status=%d path=%s remote=%s host=%s: %s", status,
                    escaped(request.path, 80), request.remote,
                    escaped(request.headers.get("Host", ""), 80), reason)  # fmt: skip
        return web.json_response({"error": reason}, status=status)

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.origins.host_allowed(request):  # DNS rebinding: GETs too
            return self.refuse(request, 421, "this page does not answer to that host")
        if "token" in request.query:
            return web.json_response(
                {"error": "a token is never accepted in an address: log in at /login"},
                status=400,
            )
        if request.method not in ("GET", "HEAD"):
            problem = self.origins.change_problem(request, self.bearer(request))
            if problem is not None:
                return self.refuse(request, *problem)
        if (
            request.path.startswith(OPEN_PATHS)
            or (request.path in HEALTH_PATHS and is_loopback_address(request.remote))
            or await self.authorized(request)
        ):
            response = await handler(request)
            response.headers.setdefault("Cache-Control", "no-store")
            response.headers["X-Frame-Options"] = "DENY"
            response.headers["Referrer-Policy"] = "no-referrer"
            return response
        if request.path.startswith("/api/") or request.path in MACHINE_PATHS:
            # A program (a scraper, a monitor) gets a status, not the login page.
            return web.json_response({"error": "log in first"}, status=401)
        raise web.HTTPFound("/login")

    async def login(self, request: web.Request) -> web.Response:
        body = await json_body(request)
        token = str(body.get("token", ""))
        if self.token is None:
            return web.json_response({"ok": True})
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            log.warning("pit_login_refused remote=%s", request.remote)
            await asyncio.sleep(1.0)  # slows guessing down
            return web.json_response({"error": "wrong token"}, status=403)
        cookie, now = session_id(), time.time()
        key = session_hash(cookie)
        await self.database.call(
            lambda s: s.sessions.session_add(key, self.tag, now, now + SESSION_S)
        )
        response = web.json_response({"ok": True})
        response.set_cookie(
            SESSION_COOKIE, cookie, httponly=True, samesite="Strict", max_age=SESSION_S,
            secure=secure(request), path="/",
        )  # fmt: skip
        return response

    async def logout(self, request: web.Request) -> web.Response:
        """The session ends here and now, server-side (a copied cookie is worth nothing)."""
        cookie = request.cookies.get(SESSION_COOKIE, "")
        done = False
        if cookie:
            key = session_hash(cookie)
            self.sessions.forget(key)
            done = await self.database.call(lambda s: s.sessions.session_revoke(key, time.time()))
        response = web.json_response({"ok": True, "revoked": done})
        response.del_cookie(SESSION_COOKIE, path="/")
        return response

    async def supervisor(self, request: web.Request, body: dict[str, Any]) -> str | web.Response:
        """The badge of the supervisor whose badge and PIN ``body`` holds, or the refusal."""
        if self.supervisors is None:
            return web.json_response(
                {"error": "acknowledging from the pit takes a supervisor's badge and PIN: "
                          "set [commands] supervisors_file"},
                status=409,
            )  # fmt: skip
        badge, pin = str(body.get("badge", "")).strip(), str(body.get("pin", ""))
        if not badge or not pin or len(badge) > 32 or len(pin) > 64:
            return web.json_response({"error": "give the supervisor's badge and PIN"}, status=400)
        book = self.supervisors
        decision = await asyncio.to_thread(book.check, badge, pin, request.remote or "")
        if not decision.allowed:
            log.warning("pit_supervisor_refused badge=%s remote=%s why=%s", escaped(badge, 32),
                        request.remote, decision.code)  # fmt: skip
            return web.json_response({"error": decision.reason}, status=decision.status)
        return badge


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object, or ``{}`` for anything else (the caller says what is missing)."""
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
