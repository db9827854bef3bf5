"""The display server: the dealer page, the supervisor page, their JSON and the live stream.

Plain aiohttp, plain files (controller/display/static/: HTML, CSS, JS; no build step, no CDN).
Every page and JSON endpoint passes :class:`~controller.display.access.AccessPolicy`; every
request that changes anything must be JSON from the page's own origin, and its body must match
its endpoint's strict model (controller/display/bodies.py) or it is a 400. Dealer input goes to
the table as the same commands MQTT sends (``host.submit``), so the journal records it like
any other command. docs/display.md lists the endpoints and what is refused.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import structlog
from aiohttp import hdrs, web
from pydantic import ValidationError

from controller.badges import BadgeBook, Lockouts, read_dealers, read_supervisors
from controller.config import Config, ConfigError
from controller.display import bodies
from controller.display.access import SESSION_COOKIE, AccessPolicy
from controller.display.bodies import BodyError
from controller.display.guard import ConnectionGuard, StreamLimiter, Tally
from controller.display.health import health_routes
from controller.display.kiosk import KIOSK_COOKIE, KioskKey, read_kiosk_token
from controller.display.state import CLOSE, LiveState, Update
from controller.display.stats import side_wagers, two_jacks
from controller.display.supervisors import PinGuard, SupervisorGate
from controller.game.cards import CardError, parse_cards
from controller.game.setting import Setting
from controller.http_rules import Decision, is_loopback_address
from controller.journal import RoundRecord, history
from controller.journal.views import JournalView
from controller.messages import (
    AcknowledgeAlarm,
    Command,
    EnterDice,
    PlayerPayload,
    PlayerSetting,
    RoundPayload,
    SetSeats,
    SignIn,
    SignOut,
    VoidRound,
)
from controller.ports import DisplayHost, Origin, PortInUse
from controller.table import Refusal, player_result

if TYPE_CHECKING:
    from controller.metrics import TableMetrics

log = structlog.get_logger(__name__)

STATIC_DIR = Path(__file__).with_name("static")
# The pages call the controller "not responding" after three missed heartbeats.
HEARTBEAT_S = 2.0
#: The ``Server`` header of every answer: no software name or version for a scanner to match.
SERVER_NAME = "paigow-table"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}

POLICY_KEY = web.AppKey("policy", AccessPolicy)


@dataclass
class DisplayContext:
    """What the handlers need: the daemon, the live state, the access policy, the supervisors'
    credentials (or the shared void PIN) and the dealers'."""

    host: DisplayHost
    state: LiveState
    policy: AccessPolicy
    supervisors: SupervisorGate
    streams: StreamLimiter
    tally: Tally
    dealers: BadgeBook | None = None
    guard: ConnectionGuard | None = None  # set while serving
    #: Wrong supervisor tokens at the login, per source (the same doubling lockout as PINs).
    logins: Lockouts = field(default_factory=Lockouts)
    #: Whether a peer is the table computer itself: its commands are journaled on the
    #: ``kiosk`` channel. (The limits do not ask: they prefer the kiosk's credential.)
    local_peer: Callable[[str | None], bool] = is_loopback_address
    #: ``/metrics`` (controller/metrics.py), attached when serving; None: not served
    metrics: TableMetrics | None = None

    @property
    def journal(self) -> JournalView:
        return self.host.journal

    @property
    def pins(self) -> PinGuard:
        """The shared void PIN (the fallback when no supervisors file is configured)."""
        return self.supervisors.pins

    def controls(self, request: web.Request) -> dict[str, Any]:
        problem = self.supervisors.problem
        return {
            "dealer_input": self.policy.dealer_input_for(request),
            # Voiding, acknowledging and correcting need a supervisor: by badge and PIN
            # ("badge") or, without a supervisors file, by the shared void PIN ("shared_pin").
            "void_enabled": problem is None,
            "void_problem": problem,
            "supervisor": self.supervisors.mode,
            "sign_in_enabled": self.dealers is not None,
            # This page carries the kiosk's credential (kept served under a flood).
            "kiosk": self.policy.is_kiosk(request),
        }

    def channel(self, remote: str) -> str:
        return "kiosk" if self.local_peer(remote) else "display"

    def refused(self, request: web.Request, command: str, decision: Decision) -> None:
        """Journal a refusal (a wrong PIN, a locked-out source); the table alarms after N."""
        remote = request.remote or ""
        log.warning(f"{command}_refused", remote=remote, reason=decision.reason)
        self.host.refused(
            Refusal(self.channel(remote), remote, command, decision.code, decision.reason)
        )


CONTEXT_KEY = web.AppKey("context", DisplayContext)


# --- helpers ---------------------------------------------------------------------------------


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"ok": False, "error": message}, status=status)


@functools.cache
def _login_html() -> bytes:
    return (STATIC_DIR / "login.html").read_bytes()


def _refuse(decision: Decision, *, login_page: bool = False) -> web.Response:
    """The refusal as JSON; a browser asking for a page without a session (401) gets the
    sign-in page instead (static: no table data in it)."""
    if decision.status == 401 and login_page:
        response = web.Response(
            body=_login_html(),
            status=401,
            content_type="text/html",
            charset="utf-8",
            headers={"Cache-Control": "no-store"},
        )
    else:
        response = _error(decision.status, decision.reason)
    if decision.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="paigow-table"'
    return response


def _int_arg(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(request.query.get(name, default))
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer") from None
    return max(low, min(high, value))


def _record_json(record: RoundRecord, *, events: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "round_id": record.round_id,
        "table_id": record.table_id,
        "seq": record.seq,
        "status": str(record.status),
        "reason": record.reason,
        "opened_at": record.opened_at,
        "closed_at": record.closed_at,
        "result": record.result,
    }
    if events:
        data["events"] = [
            {"id": e.id, "at": e.at, "kind": e.kind, "payload": e.payload} for e in record.events
        ]
    return data


def _summary(record: RoundRecord) -> dict[str, Any]:
    result = record.result or {}
    dealer = result.get("dealer") or {}
    setting = dealer.get("setting") or {}
    return {
        "round_id": record.round_id,
        "seq": record.seq,
        "status": str(record.status),
        "reason": record.reason,
        "opened_at": record.opened_at,
        "closed_at": record.closed_at,
        "first_position": result.get("first_position"),
        "two_jacks": bool(dealer.get("two_jacks")),
        "rule": setting.get("rule"),
        "front": setting.get("front"),
        "back": setting.get("back"),
    }


# --- middleware ------------------------------------------------------------------------------

ACTIONS = frozenset(
    {"/api/dice", "/api/seats", "/api/player-setting", "/api/player-setting/preview", "/api/void"}
)
#: The supervisor's login and logout: open to a remote client without a session (same origin).
SESSION_PATHS = frozenset({"/api/login", "/api/logout"})
PAGES = frozenset({"/", "/dealer", "/supervisor", "/kiosk"})
READS = frozenset({"GET", "HEAD"})
TOKEN_IN_URL = (
    "the supervisor token is not accepted in the address (it would be kept in histories, "
    "bookmarks and logs): sign in on the page, or send it as Authorization: Bearer"
)


def _token_in_url(request: web.Request) -> web.Response:
    """A ``token`` in the query string grants nothing: a page is sent to its address without
    it (so it leaves the address bar and the history), anything else is a 400."""
    log.warning("display_token_in_url", remote=request.remote, path=request.path)
    if request.method in READS and request.path in PAGES:
        rest = [(k, v) for k, v in request.query.items() if k != "token"]
        raise web.HTTPSeeOther(request.path + (f"?{urlencode(rest)}" if rest else ""))
    return _error(400, TOKEN_IN_URL)


@web.middleware
async def access_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every request passes the access rules; static files (no table data in them) are free.
    A request that changes anything must be JSON (``Content-Type: application/json``) from the
    page's own origin; its body is read by the handler (a bad one is a 400). An unforeseen
    failure is a JSON 500 with no detail (the detail goes to the log)."""
    ctx = request.app.get(CONTEXT_KEY)
    policy = request.app[POLICY_KEY]
    guard = ctx.guard if ctx is not None else None
    if guard is None:
        return await _access(request, handler, policy)
    # Its request head is complete: no arrival timeout, and not idle until the handler returns.
    if not guard.request_arrived(request.transport, kiosk=policy.is_kiosk(request)):
        response = _error(503, "the display is at its connection limit: try again later")
        response.force_close()
        return response
    try:
        return await _access(request, handler, policy)
    finally:
        guard.request_done(request.transport)


async def _access(
    request: web.Request, handler: Handler, policy: AccessPolicy
) -> web.StreamResponse:
    """The access rules, then the handler (the middleware's body, inside the guard's count)."""
    if not policy.host_allowed(request.headers.get("Host"), _local_port(request)):
        # A name the server is not known by (DNS rebinding): nothing at all, static files too.
        return _refused(request, Decision(403, "unexpected Host header"))
    if request.path.startswith("/static/"):
        return await handler(request)
    if "token" in request.query:
        return _token_in_url(request)
    decision = _decide(request, policy)
    if not decision.allowed:
        return _refused(request, decision)
    if request.method not in READS and request.content_type != "application/json":
        return _error(415, "a request that changes anything must be application/json")
    return await _handle(request, handler)


def _local_port(request: web.Request) -> int | None:
    """The port the connection reached (None when the transport cannot say)."""
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    if isinstance(sockname, tuple) and len(sockname) >= 2 and isinstance(sockname[1], int):
        return sockname[1]
    return None


def _decide(request: web.Request, policy: AccessPolicy) -> Decision:
    """The rule the request passes: logging in, acting (anything that changes), or viewing."""
    if request.path in SESSION_PATHS:
        return policy.can_log_in(request)
    if request.path in ACTIONS or request.method not in READS:
        return policy.can_act(request)
    return policy.can_view(request)


def _refused(request: web.Request, decision: Decision) -> web.Response:
    """A refused request, logged: a page asked for by a browser gets the login page."""
    log.warning(
        "display_refused",
        remote=request.remote,
        path=request.path,
        status=decision.status,
        reason=decision.reason,
    )
    page = request.path in PAGES and "text/html" in request.headers.get("Accept", "")
    return _refuse(decision, login_page=page)


async def _handle(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The handler's response; a bad body is a 400, an API's client error a JSON one, and an
    unforeseen failure a JSON 500 with no detail (the detail goes to the log)."""
    try:
        return await handler(request)
    except BodyError as exc:
        return _error(400, str(exc))
    except web.HTTPClientError as exc:
        if request.path.startswith("/api/"):
            return _error(exc.status, exc.text or exc.reason)
        raise
    except web.HTTPException:
        raise
    except Exception:
        log.exception("display_request_failed", method=request.method, path=request.path)
        return _error(500, "internal error: see the controller's log")


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers[hdrs.SERVER] = SERVER_NAME
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if request.path.startswith("/api/"):
        response.headers.setdefault("Cache-Control", "no-store")
    else:
        response.headers.setdefault("Cache-Control", "no-cache")


# --- handlers --------------------------------------------------------------------------------


def _ctx(request: web.Request) -> DisplayContext:
    return request.app[CONTEXT_KEY]


async def index(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/dealer" + (f"?{request.query_string}" if request.query_string else ""))


async def dealer_page(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC_DIR / "dealer.html")


async def supervisor_page(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC_DIR / "supervisor.html")


async def kiosk_page(request: web.Request) -> web.StreamResponse:
    """Where the kiosk launcher sends the browser, with a one-time ticket after ``#``: the
    page spends it (``POST /api/kiosk``) and goes on to ``/dealer``. No table data in it."""
    return web.FileResponse(STATIC_DIR / "kiosk.html")


async def api_state(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    return web.json_response({**ctx.state.snapshot(), "controls": ctx.controls(request)})


async def api_events(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: a ``snapshot`` first, then ``round``, ``player``, ``alarm``,
    ``device``, ``status`` and ``seats`` updates as they are journaled."""
    ctx = _ctx(request)
    queue, snapshot = ctx.state.subscribe()
    kiosk = ctx.policy.is_kiosk(request)  # the kiosk's stream is never closed for another
    if not ctx.streams.admit(queue, kiosk, ctx.state.close_client):
        ctx.state.unsubscribe(queue)
        return _error(503, "too many live streams on this table: try again later")
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    try:
        await response.prepare(request)
        first = Update("snapshot", {**snapshot, "controls": ctx.controls(request)})
        await response.write(b"retry: 1000\n\n" + first.encode(0))
        event_id = 0
        while True:
            try:
                update = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
            except TimeoutError:
                # A named event (not a comment), so a page sees a silent but open stream too.
                await response.write(b"event: heartbeat\ndata: {}\n\n")
                continue
            if update is CLOSE:
                # Ended by the server (stopping, too far behind, or the stream cap): close the
                # connection too, or it would hold a connection slot as an idle keep-alive.
                response.force_close()
                break
            event_id += 1
            await response.write(update.encode(event_id))
    except ConnectionResetError:
        pass  # the browser went away; it reconnects and starts from a new snapshot
    finally:
        ctx.streams.release(queue)
        ctx.state.unsubscribe(queue)
    return response


async def api_rounds(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    limit = _int_arg(request, "limit", 50, 1, 500)
    offset = _int_arg(request, "offset", 0, 0, history.MAX_SCAN)
    query = request.query.get("q", "")[:128]
    records = await asyncio.to_thread(history.search, ctx.journal.history, query, limit, offset)
    return web.json_response(
        {"query": query, "offset": offset, "rounds": [_summary(r) for r in records[:limit]]}
    )


async def api_round(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    round_id = request.match_info["round_id"]
    record = await asyncio.to_thread(ctx.journal.history.get_round, round_id)
    if record is None or record.table_id != ctx.journal.table_id:
        return _error(404, f"no round {round_id}")
    return web.json_response(_record_json(record, events=True))


async def api_rounds_per_hour(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    hours = _int_arg(request, "hours", 24, 1, 24 * 14)
    data = await asyncio.to_thread(
        history.rounds_per_hour, ctx.journal.history, hours, ctx.host.clock()
    )
    return web.json_response({"hours": data})


async def api_two_jacks(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    rounds = _int_arg(request, "rounds", 1000, 1, history.MAX_SCAN)
    results = await asyncio.to_thread(history.results_oldest_first, ctx.journal.history, rounds)
    return web.json_response(two_jacks(results))


async def api_side_wagers(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    rounds = _int_arg(request, "rounds", 1000, 1, history.MAX_SCAN)
    results = await asyncio.to_thread(history.results_oldest_first, ctx.journal.history, rounds)
    return web.json_response(side_wagers(results))


async def api_overview(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    stats = await asyncio.to_thread(ctx.journal.history.stats)
    return web.json_response(
        {
            "journal": {
                "rounds": stats.rounds,
                "by_status": stats.by_status,
                "events": stats.events,
                "outbox_pending": stats.outbox_pending,
                "oldest_pending_at": stats.oldest_pending_at,
                "last_round_at": stats.last_round_at,
            },
            "live_clients": ctx.state.clients,
            "limits": {
                "connections": ctx.guard.connections if ctx.guard is not None else 0,
                "max_connections": ctx.host.config.display.max_connections,
                "streams": ctx.streams.streams,
                "max_streams": ctx.streams.max_streams,
                **ctx.tally.counts,
            },
        }
    )


# --- dealer input ----------------------------------------------------------------------------


async def _submit(ctx: DisplayContext, command: Command, request: web.Request) -> web.Response:
    remote = request.remote or ""
    origin = Origin(ctx.channel(remote), remote)
    try:
        reply = await ctx.host.submit(command, origin=origin)
    except TimeoutError:
        return _error(504, "the table did not answer in time")
    body = {"ok": reply.ok, "error": reply.error, "data": reply.data}
    return web.json_response(body, status=200 if reply.ok else 409)


def _request_id() -> str:
    return f"display-{uuid.uuid4().hex[:12]}"


def _validation(exc: ValidationError) -> web.Response:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"])
    return _error(400, f"{where}: {first['msg']}" if where else str(first["msg"]))


async def api_dice(request: web.Request) -> web.StreamResponse:
    body = await bodies.body(request, bodies.DiceBody)  # three integers 1-6, strictly
    try:
        command = EnterDice(
            dice=(body.dice[0], body.dice[1], body.dice[2]), request_id=_request_id()
        )
    except ValidationError as exc:
        return _validation(exc)
    return await _submit(_ctx(request), command, request)


async def api_seats(request: web.Request) -> web.StreamResponse:
    body = await bodies.body(request, bodies.SeatsBody)
    try:
        command = SetSeats(occupied=body.occupied, request_id=_request_id())
    except ValidationError as exc:
        return _validation(exc)
    return await _submit(_ctx(request), command, request)


async def api_player_setting(request: web.Request) -> web.StreamResponse:
    """A player's setting. Entered again for the same seat it is a correction, which the table
    takes only with a supervisor (``by``) and a reason: a PIN given here is checked as the
    void's is (badge and PIN, or the shared PIN and a name), and a wrong one refused and
    journaled; the table refuses a correction without one."""
    ctx = _ctx(request)
    body = await bodies.body(request, bodies.PlayerSettingBody)
    by: str | None = None
    if body.pin is not None:
        supervisor = await ctx.supervisors.verify(
            body.badge, body.pin, body.by, request.remote or ""
        )
        if not supervisor.decision.allowed:
            ctx.refused(request, "player_setting", supervisor.decision)
            return _refuse(supervisor.decision)
        if not supervisor.by:
            return _error(400, "by: give the supervisor's name with the PIN")
        by = supervisor.by
    try:
        command = PlayerSetting.model_validate(
            {
                "seat": body.seat,
                "front": body.front,
                "house_way": body.house_way,
                "round_id": body.round_id,
                "request_id": _request_id(),
                "by": by,
                "reason": body.reason.strip(),
            }
        )
    except ValidationError as exc:
        return _validation(exc)
    return await _submit(ctx, command, request)


async def api_player_preview(request: web.Request) -> web.StreamResponse:
    """What a player's setting would be (hands, foul, the Pai Gow result) before it is entered;
    computed from the round as closed and the same pure rules the table uses, nothing stored."""
    ctx = _ctx(request)
    body = await bodies.body(request, bodies.PreviewBody)
    p = ctx.state.last_payload
    if p is None or p.status != "settled" or p.dealer is None:
        return _error(409, "no settled round: a player sets only after the dealer")
    if body.round_id not in (None, p.round_id):
        return _error(409, f"round {body.round_id} is not the current round")
    seat = next((s for s in p.seats if s.seat == body.seat), None)
    if seat is None:
        return _error(404, f"seat {body.seat} has no hand this round")
    rules = ctx.host.table.settings.rules
    try:
        front_texts = body.front
        dealer_cards = parse_cards(p.dealer.cards)
        d = p.dealer.setting
        dealer = (
            Setting.from_front(dealer_cards, parse_cards(d.front), d.rule, rules.wheel_high)
            if d is not None
            else None
        )
        setting, result = player_result(
            seat.cards,
            [str(t) for t in front_texts],
            dealer,
            [int(c) for c in dealer_cards],
            rules,
            seat=seat.seat,
        )
    except (CardError, ValueError) as exc:
        return _error(400, str(exc))
    return web.json_response(
        {
            "ok": True,
            "seat": seat.seat,
            "setting": setting.to_dict(),
            "foul": setting.is_foul,
            "pai_gow": result.to_dict(),
        }
    )


async def _guarded(
    ctx: DisplayContext,
    request: web.Request,
    decision: Decision,
    kind: str,
    build: Callable[[], Command],
) -> web.Response:
    """A command behind a PIN: refused and journaled (``ctx.refused``) unless ``decision``
    allows it, then built (a validation error is a 422) and handed to the table."""
    if not decision.allowed:
        ctx.refused(request, kind, decision)
        return _refuse(decision)
    try:
        command = build()
    except ValidationError as exc:
        return _validation(exc)
    return await _submit(ctx, command, request)


async def api_void(request: web.Request) -> web.StreamResponse:
    """A void, with a supervisor's badge and PIN (the command names the badge) or, without a
    supervisors file, the shared void PIN (and the name typed, if any)."""
    ctx = _ctx(request)
    body = await bodies.body(request, bodies.VoidBody)
    supervisor = await ctx.supervisors.verify(body.badge, body.pin, body.by, request.remote or "")
    return await _guarded(
        ctx,
        request,
        supervisor.decision,
        "void_round",
        lambda: VoidRound(
            reason=body.reason or "voided by dealer",
            round_id=body.round_id,
            request_id=_request_id(),
            by=supervisor.by or None,
        ),
    )


async def api_recall(request: web.Request) -> web.StreamResponse:
    """The regulator's recall (docs/audit.md) of the last N rounds (default 10) or one round:
    the same text ``paigow-table audit recall`` prints, and the rounds as JSON."""
    from controller.journal.audit import recall_rounds, recall_text

    ctx = _ctx(request)
    last = _int_arg(request, "last", 10, 1, 100)
    round_id = request.query.get("round")
    rounds = await asyncio.to_thread(recall_rounds, ctx.journal.path, last=last, round_id=round_id)
    return web.json_response({"text": "\n".join(recall_text(rounds)), "rounds": rounds})


async def api_protection(request: web.Request) -> web.StreamResponse:
    """Game protection's panel: each test's state, chart and observed vs exact frequencies."""
    panel = _ctx(request).host.panel("protection")
    return web.json_response(panel if panel is not None else {"enabled": False})


async def api_acknowledge(request: web.Request) -> web.StreamResponse:
    """A latched alarm acknowledged by a supervisor: badge and PIN, and the acknowledgement
    names the badge (a name typed beside it is not used); without a supervisors file, the
    shared void PIN and the name typed."""
    ctx = _ctx(request)
    body = await bodies.body(request, bodies.AcknowledgeBody)
    supervisor = await ctx.supervisors.verify(body.badge, body.pin, body.by, request.remote or "")
    return await _guarded(
        ctx,
        request,
        supervisor.decision,
        "acknowledge_alarm",
        lambda: AcknowledgeAlarm(
            alarm_id=body.alarm_id,
            by=supervisor.by,
            note=body.note,
            request_id=_request_id(),
        ),
    )


async def api_sign_in(request: web.Request) -> web.StreamResponse:
    """A dealer signs in with badge and PIN (``[display] dealers_file``)."""
    ctx = _ctx(request)
    if ctx.dealers is None:
        return _error(403, "sign-in is disabled: no dealers_file is configured")
    body = await bodies.body(request, bodies.SignInBody)
    badge = body.badge.strip()
    decision = await asyncio.to_thread(ctx.dealers.check, badge, body.pin, request.remote or "")
    return await _guarded(
        ctx, request, decision, "sign_in", lambda: SignIn(dealer_id=badge, request_id=_request_id())
    )


async def api_sign_out(request: web.Request) -> web.StreamResponse:
    await bodies.body(request, bodies.EmptyBody)
    return await _submit(_ctx(request), SignOut(request_id=_request_id()), request)


async def api_login(request: web.Request) -> web.StreamResponse:
    """A remote supervisor's login: the token in a JSON body (never in a URL); the answer sets
    a session cookie (HttpOnly, SameSite=Strict) that carries the page, its API calls and its
    live stream. Wrong tokens lock their source out as wrong PINs do."""
    ctx = _ctx(request)
    body = await bodies.body(request, bodies.LoginBody)
    remote = request.remote or ""
    if ctx.policy.token is None:
        return _error(
            403, "remote access is disabled: no supervisor token is configured on this table"
        )
    locked = ctx.logins.locked(remote)
    if locked is not None:
        log.warning("supervisor_login_refused", remote=remote, reason=locked.reason)
        return _refuse(locked)
    if not ctx.policy.token_ok(body.token):
        ctx.logins.failed(remote)
        log.warning("supervisor_login_refused", remote=remote, reason="wrong supervisor token")
        return _error(403, "wrong supervisor token")
    ctx.logins.succeeded(remote)
    sessions = ctx.policy.sessions
    response = web.json_response({"ok": True})
    response.set_cookie(
        SESSION_COOKIE,
        sessions.open(),
        max_age=int(sessions.lifetime),
        path="/",
        httponly=True,
        samesite="Strict",
    )
    log.info("supervisor_login", remote=remote)
    return response


def _kiosk_only(request: web.Request) -> web.Response | None:
    if is_loopback_address(request.remote):
        return None
    return _error(403, "the kiosk's credential is given on the table computer only (loopback)")


async def api_kiosk_ticket(request: web.Request) -> web.StreamResponse:
    """The kiosk launcher's: a one-time ticket (good for ``TICKET_S``) for the kiosk token.
    Wrong tokens are refused and counted, not locked out: a lockout would let any program on
    the table computer keep the kiosk from its credential (the token is 32+ random
    characters: guessing it is hopeless)."""
    if (refused := _kiosk_only(request)) is not None:
        return refused
    ctx = _ctx(request)
    body = await bodies.body(request, bodies.KioskTicketBody)
    if not ctx.policy.kiosk.token_ok(body.token):
        ctx.tally.add("kiosk_token_refused")
        return _error(403, "wrong kiosk token")
    return web.json_response(
        {"ok": True, "ticket": ctx.policy.kiosk.ticket(), "expires_s": ctx.policy.kiosk.lifetime}
    )


async def api_kiosk(request: web.Request) -> web.StreamResponse:
    """The kiosk page spends its ticket: the answer sets the kiosk's cookie (HttpOnly,
    SameSite=Strict, no expiry: it ends with the browser)."""
    if (refused := _kiosk_only(request)) is not None:
        return refused
    ctx = _ctx(request)
    body = await bodies.body(request, bodies.KioskBody)
    if not ctx.policy.kiosk.redeem(body.ticket):
        ctx.tally.add("kiosk_ticket_refused")
        return _error(403, "this kiosk ticket is spent, expired or unknown: start the kiosk again")
    response = web.json_response({"ok": True})
    response.set_cookie(
        KIOSK_COOKIE, ctx.policy.kiosk.cookie, path="/", httponly=True, samesite="Strict"
    )
    log.info("kiosk_credential_given", remote=request.remote)
    return response


async def api_logout(request: web.Request) -> web.StreamResponse:
    await bodies.body(request, bodies.EmptyBody)
    _ctx(request).policy.sessions.close(request.cookies.get(SESSION_COOKIE))
    response = web.json_response({"ok": True})
    response.del_cookie(SESSION_COOKIE, path="/")
    return response


# --- the application -------------------------------------------------------------------------

#: A credential inside a text: a ``token`` or ``ticket`` in a query string, Bearer credentials,
#: our cookies (the supervisor's session, the kiosk's).
_CREDENTIAL = re.compile(
    r"(?i)(token=|ticket=|bearer\s+|" + SESSION_COOKIE + "=|" + KIOSK_COOKIE + r"=)[^\s&'\";\\]*"
)


def redact(text: str) -> str:
    """``text`` with every credential in it replaced by ``<redacted>``."""
    return _CREDENTIAL.sub(r"\1<redacted>", text)


class _Redacted(Exception):
    """Stands in, in a log record, for an exception whose message held a credential."""


class RedactCredentials(logging.Filter):
    """On aiohttp's loggers: a request it cannot parse is logged with its request line (and
    the error's message repeats it), which may hold a token. The message and the exception's
    text are logged with every credential replaced (the traceback is kept); the record's
    template is unchanged, so the log's rate limit still counts them as one event."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        if record.exc_info and record.exc_info[1] is not None:
            texts: list[str] = []
            exc: BaseException | None = record.exc_info[1]
            while exc is not None and len(texts) < 8:  # the exception and what it was raised from
                texts.append(f"{type(exc).__name__}: {exc}")
                exc = exc.__cause__ or exc.__context__
            text = " (from) ".join(texts)
            if redact(text) != text:
                record.exc_info = (_Redacted, _Redacted(redact(text)), record.exc_info[2])
                record.exc_text = None
        return True


_REDACT = RedactCredentials()


def _redact_aiohttp_logs() -> None:
    for name in ("aiohttp.server", "aiohttp.web", "aiohttp.access"):
        logger = logging.getLogger(name)
        if _REDACT not in logger.filters:
            logger.addFilter(_REDACT)


class _NeutralHandler(web.RequestHandler):
    """aiohttp's handler of one connection, whose own answers name the server as
    ``SERVER_NAME`` too: the application's ``on_response_prepare`` does it for every answer
    that reaches the application, this (``handle_error``) for those aiohttp makes itself, before
    any route (a malformed request), which would otherwise name aiohttp's version."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        response = super().handle_error(request, status, exc, message)
        response.headers[hdrs.SERVER] = SERVER_NAME
        return response


def build_app(ctx: DisplayContext) -> web.Application:
    app = web.Application(middlewares=[access_middleware], client_max_size=bodies.MAX_BODY)
    app[POLICY_KEY] = ctx.policy
    app[CONTEXT_KEY] = ctx
    app.on_response_prepare.append(_security_headers)
    r = app.router
    r.add_get("/", index)
    r.add_get("/dealer", dealer_page)
    r.add_get("/supervisor", supervisor_page)
    r.add_get("/kiosk", kiosk_page)
    r.add_get("/api/state", api_state)
    r.add_get("/api/events", api_events)
    r.add_get("/api/overview", api_overview)
    r.add_get("/api/rounds", api_rounds)
    r.add_get("/api/rounds/{round_id}", api_round)
    r.add_get("/api/charts/rounds-per-hour", api_rounds_per_hour)
    r.add_get("/api/charts/two-jacks", api_two_jacks)
    r.add_get("/api/charts/side-wagers", api_side_wagers)
    r.add_post("/api/dice", api_dice)
    r.add_post("/api/seats", api_seats)
    r.add_post("/api/player-setting", api_player_setting)
    r.add_post("/api/player-setting/preview", api_player_preview)
    r.add_post("/api/void", api_void)
    r.add_post("/api/alarms/acknowledge", api_acknowledge)
    r.add_get("/api/protection", api_protection)
    r.add_get("/api/recall", api_recall)
    r.add_post("/api/sign-in", api_sign_in)
    r.add_post("/api/sign-out", api_sign_out)
    r.add_post("/api/login", api_login)
    r.add_post("/api/logout", api_logout)
    r.add_post("/api/kiosk/ticket", api_kiosk_ticket)
    r.add_post("/api/kiosk", api_kiosk)
    r.add_static("/static", STATIC_DIR, append_version=False)
    health_routes(app, lambda request: _ctx(request).host, lambda request: _ctx(request).metrics)
    return app


def _table_info(host: DisplayHost) -> dict[str, Any]:
    t = host.config.table
    s = host.table.settings
    return {
        "id": t.id,
        "name": t.name or t.id,
        "seats": [{"position": p, "seat": label} for p, label in sorted(t.seats.items())],
        "rules": s.describe_rules(),
        "paytables": s.describe_paytables(),
    }


def _secret(read: Callable[[], str | None], what: str) -> str | None:
    try:
        return read()
    except ConfigError as exc:
        log.error("display_secret_unreadable", secret=what, errors=[str(e) for e in exc.errors])
        return None


async def last_closed_round(
    host: DisplayHost, tries: int = 5
) -> tuple[RoundPayload, list[PlayerPayload]] | None:
    """The journal's newest closed round (``history.last_round``, read in a thread), as the
    table stands once it is read: a round the table closed while the journal was being read
    is read again, not missed (a display started as a round closed showed no round until the
    next one)."""
    last = None
    for _ in range(tries):
        last = await asyncio.to_thread(history.last_round, host.journal.history)
        current = host.table.round
        if current is None or not current.closed:
            return last
        if last is not None and last[0].round_id == current.round_id:
            return last
    return last


class DisplayService:
    """The daemon service that serves the pages (``host.config.display``; ``host``/``port``
    given here override it, e.g. port 0 for a free port in tests). ``started`` is set once it
    listens; ``port`` is then the port it got. A port it cannot bind is retried, never fatal:
    the table goes on dealing without its monitor."""

    name = "display"

    def __init__(
        self,
        *,
        host: str | None = None,
        port: int | None = None,
        remote_dealer_input: bool = False,
        retry_s: float = 5.0,
        local_peer: Callable[[str | None], bool] = is_loopback_address,
        metrics: TableMetrics | None = None,
    ) -> None:
        #: The daemon's metrics (shared with the publisher by the wiring); None: made here
        self.metrics = metrics
        self.host = host
        self.port = port
        self.remote_dealer_input = remote_dealer_input
        self.retry_s = retry_s
        self.local_peer = local_peer
        self.started = asyncio.Event()
        self.context: DisplayContext | None = None
        self._claimed: socket.socket | None = None

    def claim(self, config: Config) -> None:
        """Bind the page's port now, before the daemon starts (``PortClaimer``): a port in use is
        :class:`~controller.ports.PortInUse`, so ``run`` exits 69 naming it instead of dealing
        without its page. The first serve listens on this socket."""
        host = self.host or config.display.host
        port = config.display.port if self.port is None else self.port
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self._claimed = socket.create_server((host, port), family=family, backlog=128)
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise PortInUse(
                f"the dealer page's port {host}:{port} cannot be listened on ({why}): another "
                "paigow-table run, or another program; [display] port moves it"
            ) from None

    async def wait_started(self, timeout: float = 10.0) -> None:
        """Wait until the server listens (``port`` is then known)."""
        await asyncio.wait_for(self.started.wait(), timeout)

    @property
    def url(self) -> str:
        host = self.host or "127.0.0.1"
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        return f"http://{'[' + shown + ']' if ':' in shown else shown}:{self.port}"

    @property
    def kiosk_token(self) -> str | None:
        """The kiosk token in use (once serving): from ``kiosk_token_file``, or the one made at
        start, known only to this process (tests, the demo)."""
        return self.context.policy.kiosk.token if self.context is not None else None

    @staticmethod
    def _kiosk_key(path: Path | None) -> KioskKey:
        if path is not None:
            try:
                return KioskKey(read_kiosk_token(path))
            except (ConfigError, OSError, ValueError) as exc:
                # The kiosk still works, without its preference under a flood.
                errors = exc.errors if isinstance(exc, ConfigError) else [exc]
                log.error("kiosk_token_unreadable", errors=[str(e) for e in errors])
        return KioskKey()

    async def _context(self, host: DisplayHost) -> DisplayContext:
        cfg = host.config.display
        policy = AccessPolicy(
            token=_secret(cfg.read_supervisor_token, "supervisor_token_file"),
            configured_host=self.host or cfg.host,
            remote_dealer_input=self.remote_dealer_input or cfg.remote_dealer_input,
            allowed_hosts=frozenset(h.lower() for h in cfg.allowed_hosts),
            kiosk=self._kiosk_key(cfg.kiosk_token_file),
        )
        last = await last_closed_round(host)
        # From here to subscribe nothing awaits: no effect can fall between snapshot and listener.
        table = host.table
        state = LiveState(
            table=_table_info(host),
            status=table.status().model_dump(mode="json"),
            devices={name: {"online": up, "detail": ""} for name, up in table.devices.items()},
            occupied=dict(table.occupied),
            clock=host.clock,
        )
        current = table.round
        if last is not None and (current is None or current.round_id == last[0].round_id):
            state.load_round(*last)
        host.subscribe(state.on_effect)
        tally = Tally()
        pins = PinGuard(_secret(cfg.read_void_pin, "void_pin_file"))
        supervisors = SupervisorGate(pins, configured=cfg.supervisors_file is not None)
        if cfg.supervisors_file is not None:
            try:
                supervisors = SupervisorGate(
                    pins, BadgeBook(read_supervisors(cfg.supervisors_file))
                )
            except (OSError, ValueError) as exc:
                # Never the shared PIN instead: voiding, acknowledging and correcting are off.
                log.error("supervisors_file_unreadable", error=str(exc))
        elif pins.pin is not None and pins.problem is not None:
            log.error("void_pin_rejected", detail=pins.problem)
        dealers = None
        if cfg.dealers_file is not None:
            try:
                dealers = BadgeBook(read_dealers(cfg.dealers_file))
            except (OSError, ValueError) as exc:
                log.error("dealers_file_unreadable", error=str(exc))
        return DisplayContext(
            host,
            state,
            policy,
            supervisors,
            StreamLimiter(cfg.max_streams, tally=tally),
            tally,
            dealers=dealers,
            local_peer=self.local_peer,
            metrics=self._metrics(host),
        )

    def _metrics(self, host: DisplayHost) -> TableMetrics | None:
        """The daemon's metrics, hearing it from now on (before the page's first request)."""
        from controller.metrics import TableMetrics

        if self.metrics is None:
            self.metrics = TableMetrics()
        try:
            self.metrics.attach(host)
        except Exception:  # the pages matter more than their metrics
            log.exception("metrics_unavailable")
            return None
        return self.metrics

    async def run(self, host: DisplayHost) -> None:
        """Serve until cancelled. A failure here (a port in use, a journal it cannot read) is
        logged and retried: the display must never take the table down with it."""
        cfg = host.config.display
        self.host = self.host or cfg.host
        port = cfg.port if self.port is None else self.port
        while True:
            try:
                if self.context is None:
                    self.context = await self._context(host)
                await self._serve(self.context, self.host, port)
            except OSError as exc:
                log.error("display_bind_failed", host=self.host, port=port, error=str(exc))
            except Exception:
                log.exception("display_failed")
            await asyncio.sleep(self.retry_s)

    async def _serve(self, ctx: DisplayContext, host: str, port: int) -> None:
        cfg = ctx.host.config.display
        _redact_aiohttp_logs()
        handler_args: dict[str, Any] = {"access_log": None, "keepalive_timeout": cfg.idle_timeout}
        runner = web.AppRunner(build_app(ctx), shutdown_timeout=1.0, **handler_args)
        await runner.setup()
        app_server = runner.server
        assert app_server is not None
        loop = asyncio.get_running_loop()

        def connection() -> asyncio.Protocol:
            """What aiohttp's server makes for a connection (a RequestHandler of it, with the
            same arguments), of our own class: even an answer aiohttp makes before any route
            (a request it cannot parse) carries the neutral Server header."""
            return _NeutralHandler(app_server, loop=loop, **handler_args)

        # The connections behind the connection cap and the request-arrival timer.
        ctx.guard = ConnectionGuard(
            connection,
            max_connections=cfg.max_connections,
            request_timeout=cfg.request_timeout,
            tally=ctx.tally,
        )
        claimed, self._claimed = self._claimed, None
        if claimed is not None:
            server = await loop.create_server(ctx.guard, sock=claimed, backlog=128)
        else:
            server = await loop.create_server(
                ctx.guard, host, port, reuse_address=True, backlog=128
            )
        try:
            self.port = int(server.sockets[0].getsockname()[1])
            self.started.set()
            log.info("display_listening", url=self.url, token=ctx.policy.token is not None)
            await asyncio.Event().wait()
        finally:
            server.close()
            ctx.state.close_all()
            await runner.cleanup()
            ctx.guard = None
