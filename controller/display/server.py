"""The display server: the dealer page, the supervisor page, their JSON and the live stream.

Plain aiohttp, plain files (controller/display/static/: HTML, CSS, JS; no build step, no CDN).
Every page and JSON endpoint passes :class:`~controller.display.access.AccessPolicy`; dealer
input goes to the table as the same commands MQTT sends (``daemon.submit``), so the journal
records it like any other command. docs/display.md lists the endpoints.
"""

from __future__ import annotations

import asyncio
import hmac
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web
from pydantic import ValidationError

from controller.config import ConfigError
from controller.display.access import AccessPolicy, Decision, is_loopback_address
from controller.display.dealers import DealerBook, Lockouts, read_dealers
from controller.display.guard import ConnectionGuard, StreamLimiter, Tally
from controller.display.state import CLOSE, LiveState, Update
from controller.display.stats import side_wagers, two_jacks
from controller.game.cards import CardError, parse_cards
from controller.game.setting import Setting
from controller.journal import Journal, RoundRecord, history
from controller.messages import (
    AcknowledgeAlarm,
    Command,
    EnterDice,
    PlayerSetting,
    SetSeats,
    SignIn,
    SignOut,
    VoidRound,
)
from controller.ports import DisplayHost, Origin
from controller.table import Refusal, player_result

log = structlog.get_logger(__name__)

STATIC_DIR = Path(__file__).with_name("static")
# The pages call the controller "not responding" after three missed heartbeats.
HEARTBEAT_S = 2.0
PIN_MIN_DIGITS = 6

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
class PinGuard:
    """The void PIN (the supervisor's: it also acknowledges alarms), compared in constant time.
    It must have at least ``PIN_MIN_DIGITS`` digits (a shorter one disables voiding from the
    display). Each source (the client's address) has its own count of wrong PINs with a
    doubling lockout (``Lockouts``); every wrong PIN is journaled (docs/audit.md)."""

    pin: str | None
    lockouts: Lockouts = field(default_factory=Lockouts)

    @property
    def failures_total(self) -> int:
        return self.lockouts.failures_total

    @property
    def problem(self) -> str | None:
        """Why voiding from the display is off, or None."""
        if self.pin is None:
            return "voiding from the display is disabled: no void PIN is configured"
        if len(self.pin) < PIN_MIN_DIGITS or not self.pin.isdigit():
            return (
                f"voiding from the display is disabled: the void PIN must be at least "
                f"{PIN_MIN_DIGITS} digits"
            )
        return None

    def check(self, presented: str, source: str = "") -> Decision:
        problem = self.problem
        if problem is not None or self.pin is None:
            return Decision(403, problem or "", "disabled")
        locked = self.lockouts.locked(source)
        if locked is not None:
            return locked
        if hmac.compare_digest(presented.encode("utf-8"), self.pin.encode("utf-8")):
            self.lockouts.succeeded(source)
            return Decision(200)
        self.lockouts.failed(source)
        return Decision(403, "wrong PIN", "wrong_pin")


@dataclass
class DisplayContext:
    """What the handlers need: the daemon, the live state, the access policy and the PIN."""

    daemon: DisplayHost
    state: LiveState
    policy: AccessPolicy
    pins: PinGuard
    streams: StreamLimiter
    tally: Tally
    dealers: DealerBook | None = None
    guard: ConnectionGuard | None = None  # set while serving
    #: Whether a peer is on the kiosk's side of the caps (the table computer itself).
    local_peer: Callable[[str | None], bool] = is_loopback_address

    @property
    def journal(self) -> Journal:
        return self.daemon.journal

    def controls(self, request: web.Request) -> dict[str, Any]:
        return {
            "dealer_input": self.policy.dealer_input_for(request),
            "void_enabled": self.pins.problem is None,
            "void_problem": self.pins.problem,
            "sign_in_enabled": self.dealers is not None,
        }

    def channel(self, remote: str) -> str:
        return "kiosk" if self.local_peer(remote) else "display"

    def refused(self, request: web.Request, command: str, decision: Decision) -> None:
        """Journal a refusal (a wrong PIN, a locked-out source); the table alarms after N."""
        remote = request.remote or ""
        log.warning(f"{command}_refused", remote=remote, reason=decision.reason)
        self.daemon.refused(
            Refusal(self.channel(remote), remote, command, decision.code, decision.reason)
        )


CONTEXT_KEY = web.AppKey("context", DisplayContext)


# --- helpers ---------------------------------------------------------------------------------


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"ok": False, "error": message}, status=status)


def _refuse(decision: Decision) -> web.Response:
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


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="expected a JSON object") from None
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text="expected a JSON object")
    return data


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


@web.middleware
async def access_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every request passes the access rules; static files (no table data in them) are free."""
    ctx = request.app.get(CONTEXT_KEY)
    if ctx is not None and ctx.guard is not None:
        ctx.guard.request_arrived(request.transport)  # its request head is complete: no timeout
    policy = request.app[POLICY_KEY]
    if request.path.startswith("/static/"):
        return await handler(request)
    if request.path in ACTIONS or request.method not in ("GET", "HEAD"):
        decision = policy.can_act(request)
    else:
        decision = policy.can_view(request)
    if not decision.allowed:
        log.warning(
            "display_refused",
            remote=request.remote,
            path=request.path,
            status=decision.status,
            reason=decision.reason,
        )
        return _refuse(decision)
    try:
        return await handler(request)
    except web.HTTPClientError as exc:
        if request.path.startswith("/api/"):
            return _error(exc.status, exc.text or exc.reason)
        raise


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
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


async def api_state(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    return web.json_response({**ctx.state.snapshot(), "controls": ctx.controls(request)})


async def api_events(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: a ``snapshot`` first, then ``round``, ``player``, ``alarm``,
    ``device``, ``status`` and ``seats`` updates as they are journaled."""
    ctx = _ctx(request)
    queue, snapshot = ctx.state.subscribe()
    local = ctx.local_peer(request.remote)
    if not ctx.streams.admit(queue, local, ctx.state.close_client):
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
    records = await asyncio.to_thread(history.search, ctx.journal, query, limit, offset)
    return web.json_response(
        {"query": query, "offset": offset, "rounds": [_summary(r) for r in records[:limit]]}
    )


async def api_round(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    round_id = request.match_info["round_id"]
    record = await asyncio.to_thread(ctx.journal.get_round, round_id)
    if record is None or record.table_id != ctx.journal.table_id:
        return _error(404, f"no round {round_id}")
    return web.json_response(_record_json(record, events=True))


async def api_rounds_per_hour(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    hours = _int_arg(request, "hours", 24, 1, 24 * 14)
    data = await asyncio.to_thread(history.rounds_per_hour, ctx.journal, hours, ctx.daemon.clock())
    return web.json_response({"hours": data})


async def api_two_jacks(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    rounds = _int_arg(request, "rounds", 1000, 1, history.MAX_SCAN)
    results = await asyncio.to_thread(history.results_oldest_first, ctx.journal, rounds)
    return web.json_response(two_jacks(results))


async def api_side_wagers(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    rounds = _int_arg(request, "rounds", 1000, 1, history.MAX_SCAN)
    results = await asyncio.to_thread(history.results_oldest_first, ctx.journal, rounds)
    return web.json_response(side_wagers(results))


async def api_overview(request: web.Request) -> web.StreamResponse:
    ctx = _ctx(request)
    stats = await asyncio.to_thread(ctx.journal.stats)
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
                "max_connections": ctx.daemon.config.display.max_connections,
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
        reply = await ctx.daemon.submit(command, origin=origin)
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
    body = await _body(request)
    try:
        command = EnterDice.model_validate({"dice": body.get("dice"), "request_id": _request_id()})
    except ValidationError as exc:
        return _validation(exc)
    return await _submit(_ctx(request), command, request)


async def api_seats(request: web.Request) -> web.StreamResponse:
    body = await _body(request)
    try:
        command = SetSeats.model_validate(
            {"occupied": body.get("occupied"), "request_id": _request_id()}
        )
    except ValidationError as exc:
        return _validation(exc)
    return await _submit(_ctx(request), command, request)


async def api_player_setting(request: web.Request) -> web.StreamResponse:
    body = await _body(request)
    try:
        command = PlayerSetting.model_validate(
            {
                "seat": body.get("seat"),
                "front": body.get("front"),
                "house_way": bool(body.get("house_way", False)),
                "round_id": body.get("round_id"),
                "request_id": _request_id(),
            }
        )
    except ValidationError as exc:
        return _validation(exc)
    return await _submit(_ctx(request), command, request)


async def api_player_preview(request: web.Request) -> web.StreamResponse:
    """What a player's setting would be (hands, foul, the Pai Gow result) before it is entered;
    computed from the round as closed and the same pure rules the table uses, nothing stored."""
    ctx = _ctx(request)
    body = await _body(request)
    p = ctx.state.last_payload
    if p is None or p.status != "settled" or p.dealer is None:
        return _error(409, "no settled round: a player sets only after the dealer")
    if body.get("round_id") not in (None, p.round_id):
        return _error(409, f"round {body.get('round_id')} is not the current round")
    seat = next((s for s in p.seats if s.seat == body.get("seat")), None)
    if seat is None:
        return _error(404, f"seat {body.get('seat')} has no hand this round")
    rules = ctx.daemon.table.settings.rules
    try:
        front_texts = body.get("front")
        if not isinstance(front_texts, list) or len(front_texts) != 2:
            raise ValueError("give the two front cards")
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
    ctx = _ctx(request)
    body = await _body(request)
    decision = ctx.pins.check(str(body.get("pin", "")), request.remote or "")
    return await _guarded(
        ctx,
        request,
        decision,
        "void_round",
        lambda: VoidRound(
            reason=str(body.get("reason") or "voided by dealer")[:200],
            round_id=body.get("round_id"),
            request_id=_request_id(),
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
    monitor = _ctx(request).daemon.protection
    return web.json_response(monitor.panel() if monitor is not None else {"enabled": False})


async def api_acknowledge(request: web.Request) -> web.StreamResponse:
    """A latched alarm acknowledged by a named person with the supervisor's PIN."""
    ctx = _ctx(request)
    body = await _body(request)
    decision = ctx.pins.check(str(body.get("pin", "")), request.remote or "")
    return await _guarded(
        ctx,
        request,
        decision,
        "acknowledge_alarm",
        lambda: AcknowledgeAlarm(
            alarm_id=str(body.get("alarm_id") or ""),
            by=str(body.get("by") or "").strip(),
            note=str(body.get("note") or "")[:200],
            request_id=_request_id(),
        ),
    )


async def api_sign_in(request: web.Request) -> web.StreamResponse:
    """A dealer signs in with badge and PIN (``[display] dealers_file``)."""
    ctx = _ctx(request)
    if ctx.dealers is None:
        return _error(403, "sign-in is disabled: no dealers_file is configured")
    body = await _body(request)
    badge = str(body.get("badge") or "").strip()[:64]
    decision = await asyncio.to_thread(
        ctx.dealers.check, badge, str(body.get("pin", "")), request.remote or ""
    )
    return await _guarded(
        ctx, request, decision, "sign_in", lambda: SignIn(dealer_id=badge, request_id=_request_id())
    )


async def api_sign_out(request: web.Request) -> web.StreamResponse:
    return await _submit(_ctx(request), SignOut(request_id=_request_id()), request)


# --- the application -------------------------------------------------------------------------


def build_app(ctx: DisplayContext) -> web.Application:
    app = web.Application(middlewares=[access_middleware], client_max_size=64 * 1024)
    app[POLICY_KEY] = ctx.policy
    app[CONTEXT_KEY] = ctx
    app.on_response_prepare.append(_security_headers)
    r = app.router
    r.add_get("/", index)
    r.add_get("/dealer", dealer_page)
    r.add_get("/supervisor", supervisor_page)
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
    r.add_static("/static", STATIC_DIR, append_version=False)
    return app


def _table_info(daemon: DisplayHost) -> dict[str, Any]:
    t = daemon.config.table
    s = daemon.table.settings
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


class DisplayService:
    """The daemon service that serves the pages (``daemon.config.display``; ``host``/``port``
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
    ) -> None:
        self.host = host
        self.port = port
        self.remote_dealer_input = remote_dealer_input
        self.retry_s = retry_s
        self.local_peer = local_peer
        self.started = asyncio.Event()
        self.context: DisplayContext | None = None

    async def wait_started(self, timeout: float = 10.0) -> None:
        """Wait until the server listens (``port`` is then known)."""
        await asyncio.wait_for(self.started.wait(), timeout)

    @property
    def url(self) -> str:
        host = self.host or "127.0.0.1"
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        return f"http://{'[' + shown + ']' if ':' in shown else shown}:{self.port}"

    async def _context(self, daemon: DisplayHost) -> DisplayContext:
        cfg = daemon.config.display
        policy = AccessPolicy(
            token=_secret(cfg.read_supervisor_token, "supervisor_token_file"),
            configured_host=self.host or cfg.host,
            remote_dealer_input=self.remote_dealer_input or cfg.remote_dealer_input,
        )
        last = await asyncio.to_thread(history.last_round, daemon.journal)
        # From here to subscribe nothing awaits: no effect can fall between snapshot and listener.
        table = daemon.table
        state = LiveState(
            table=_table_info(daemon),
            status=table.status().model_dump(mode="json"),
            devices={name: {"online": up, "detail": ""} for name, up in table.devices.items()},
            occupied=dict(table.occupied),
            clock=daemon.clock,
        )
        current = table.round
        if last is not None and (current is None or current.round_id == last[0].round_id):
            state.load_round(*last)
        daemon.subscribe(state.on_effect)
        tally = Tally()
        pins = PinGuard(_secret(cfg.read_void_pin, "void_pin_file"))
        if pins.pin is not None and pins.problem is not None:
            log.error("void_pin_rejected", detail=pins.problem)
        dealers = None
        if cfg.dealers_file is not None:
            try:
                dealers = DealerBook(read_dealers(cfg.dealers_file))
            except (OSError, ValueError) as exc:
                log.error("dealers_file_unreadable", error=str(exc))
        return DisplayContext(
            daemon,
            state,
            policy,
            pins,
            StreamLimiter(cfg.max_streams, tally=tally),
            tally,
            dealers=dealers,
            local_peer=self.local_peer,
        )

    async def run(self, daemon: DisplayHost) -> None:
        """Serve until cancelled. A failure here (a port in use, a journal it cannot read) is
        logged and retried: the display must never take the table down with it."""
        cfg = daemon.config.display
        self.host = self.host or cfg.host
        port = cfg.port if self.port is None else self.port
        while True:
            try:
                if self.context is None:
                    self.context = await self._context(daemon)
                await self._serve(self.context, self.host, port)
            except OSError as exc:
                log.error("display_bind_failed", host=self.host, port=port, error=str(exc))
            except Exception:
                log.exception("display_failed")
            await asyncio.sleep(self.retry_s)

    async def _serve(self, ctx: DisplayContext, host: str, port: int) -> None:
        cfg = ctx.daemon.config.display
        runner = web.AppRunner(
            build_app(ctx),
            access_log=None,
            shutdown_timeout=1.0,
            keepalive_timeout=cfg.idle_timeout,
        )
        await runner.setup()
        assert runner.server is not None
        # aiohttp's protocol factory behind the connection cap and the request-arrival timer.
        ctx.guard = ConnectionGuard(
            runner.server,
            max_connections=cfg.max_connections,
            request_timeout=cfg.request_timeout,
            tally=ctx.tally,
            is_local=ctx.local_peer,
        )
        server = await asyncio.get_running_loop().create_server(
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
