"""The pit page (aiohttp): a tile per table, a table's detail and recall, live over server-sent
events, the shift's numbers and their CSV; acknowledging an alarm sends the table a signed
``acknowledge_alarm`` naming the supervisor.

Access: on a loopback address without a token the page is open to the machine only; with
``[web] token_file`` (required on any other address) a person logs in with the token once (a
JSON body, never a URL: a ``token`` in a query string is refused) and gets a session cookie;
programs send ``Authorization: Bearer <token>``. Tokens and sessions are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

import controller
from pit import shift as shift_numbers
from pit.config import PitConfig, PitConfigError, read_hex_key, read_secret
from pit.store import Outcome, Store

log = logging.getLogger("pit.web")
T = TypeVar("T")

STATIC = Path(__file__).parent / "static"
#: The table pages' shared look (common.css, the favicon), served as they are.
TABLE_STATIC = Path(controller.__file__).resolve().parent / "display" / "static"
SESSION_COOKIE = "pit_session"
SESSION_S = 12 * 3600

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Hub:
    """Fans committed batches out to the live pages: the tables a batch changed are read again
    (at most every ``interval`` s) and sent to every open event stream."""

    def __init__(self, read: Callable[[list[str]], Awaitable[list[dict[str, Any]]]]) -> None:
        self.read = read
        self.queues: set[asyncio.Queue[str]] = set()
        self.dirty: set[str] = set()
        self.sent: dict[str, str] = {}
        self.alarms: list[dict[str, Any]] = []
        self.wake = asyncio.Event()
        self.interval = 0.1
        self.pushed = 0

    def on_batch(self, outcome: Outcome) -> None:
        self.dirty |= outcome.tables
        for table, when in outcome.sent.items():
            self.sent[table] = max(self.sent.get(table, ""), when)
        self.alarms += outcome.alarms
        if outcome.tables or outcome.alarms:
            self.wake.set()

    def touch(self, table_id: str) -> None:
        self.dirty.add(table_id)
        self.wake.set()

    async def run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            await asyncio.sleep(self.interval)
            dirty, self.dirty = sorted(self.dirty), set()
            sent, self.sent = self.sent, {}
            alarms, self.alarms = self.alarms, []
            if not self.queues:
                continue
            tiles = await self.read(dirty) if dirty else []
            event = json.dumps({"tiles": tiles, "sent": sent, "alarms": alarms, "at": time.time()})
            self.pushed += 1
            for q in list(self.queues):
                if q.qsize() > 100:  # a stalled page: drop it, it reconnects and reloads
                    self.queues.discard(q)
                    continue
                q.put_nowait(f"event: tiles\ndata: {event}\n\n")


class PitWeb:
    def __init__(self, config: PitConfig, make_store: Callable[[], Store]) -> None:
        self.config = config
        self.make_store = make_store
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pit-web-db")
        self._store: Store | None = None
        self.token: str | None = None
        if config.web.token_file is not None:
            self.token = read_secret(config.web.token_file)
        elif not is_loopback(config.web.host):
            raise PitConfigError(
                f"[web] host = {config.web.host!r} is not a loopback address: set token_file"
            )
        self.hub = Hub(self._read_tiles)
        self.command_key: bytes | None = None
        if config.commands.key_file is not None:
            self.command_key = read_hex_key(config.commands.key_file)
        self.report_key: bytes | None = None
        if config.shift.report_key_file is not None:
            self.report_key = read_hex_key(config.shift.report_key_file)
        self.runner: web.AppRunner | None = None
        self.url = ""
        self.started = asyncio.Event()

    # --- database, in its own thread -------------------------------------------------------

    def _open(self) -> Store:
        if self._store is None:
            self._store = self.make_store()
        return self._store

    async def db(self, fn: Callable[[Store], T]) -> T:
        def call() -> T:
            try:
                return fn(self._open())
            except Exception:
                if self._store is not None:  # the database went away: reconnect next time
                    self._store.close()
                    self._store = None
                raise

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def _read_tiles(self, tables: list[str]) -> list[dict[str, Any]]:
        try:
            return await self.db(lambda s: s.tiles(tables))
        except Exception as exc:
            log.warning("pit_web_read_failed: %s", type(exc).__name__)
            return []

    # --- auth ------------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer ") and hmac.compare_digest(
            header[7:].strip().encode(), self.token.encode()
        ):
            return True
        return self._session_ok(request.cookies.get(SESSION_COOKIE, ""))

    def _session(self, expires: int) -> str:
        """A session cookie the pit can check without keeping it (so it outlives a restart of
        the pit): its expiry and an HMAC of it under a key derived from the token."""
        assert self.token is not None
        key = hashlib.sha256(b"pit-session\n" + self.token.encode()).digest()
        mac = hmac.new(key, str(expires).encode(), hashlib.sha256).hexdigest()
        return f"{expires}.{mac}"

    def _session_ok(self, cookie: str) -> bool:
        expires, _, _ = cookie.partition(".")
        if not expires.isdigit() or int(expires) < time.time():
            return False
        return hmac.compare_digest(cookie.encode(), self._session(int(expires)).encode())

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if "token" in request.query:
            return web.json_response(
                {"error": "a token is never accepted in an address: log in at /login"},
                status=400,
            )
        open_paths = ("/login", "/api/login", "/static/")
        if request.path.startswith(open_paths) or self._authorized(request):
            response = await handler(request)
            response.headers.setdefault("Cache-Control", "no-store")
            response.headers["X-Frame-Options"] = "DENY"
            response.headers["Referrer-Policy"] = "no-referrer"
            return response
        if request.path.startswith("/api/"):
            return web.json_response({"error": "log in first"}, status=401)
        raise web.HTTPFound("/login")

    async def login(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        token = str(body.get("token", "")) if isinstance(body, dict) else ""
        if self.token is None:
            return web.json_response({"ok": True})
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            log.warning("pit_login_refused remote=%s", request.remote)
            await asyncio.sleep(1.0)  # slows guessing down
            return web.json_response({"error": "wrong token"}, status=403)
        session = self._session(int(time.time()) + SESSION_S)
        response = web.json_response({"ok": True})
        response.set_cookie(
            SESSION_COOKIE, session, httponly=True, samesite="Strict", max_age=SESSION_S
        )
        return response

    # --- pages and data --------------------------------------------------------------------

    def _page(self, name: str) -> Callable[[web.Request], Awaitable[web.FileResponse]]:
        async def page(request: web.Request) -> web.FileResponse:
            return web.FileResponse(STATIC / name)

        return page

    async def floor(self, request: web.Request) -> web.Response:
        tiles = await self.db(lambda s: s.tiles())
        return web.json_response({"site": self.config.site.id, "tiles": tiles, "at": time.time()})

    async def table(self, request: web.Request) -> web.Response:
        tid = request.match_info["table_id"]
        detail = await self.db(lambda s: s.table_detail(tid))
        if detail is None:
            return web.json_response({"error": f"no table {tid}"}, status=404)
        return web.json_response(detail)

    async def round_(self, request: web.Request) -> web.Response:
        rid = request.match_info["round_id"]
        message = await self.db(lambda s: s.round_message(rid))
        if message is None:
            return web.json_response({"error": f"no round {rid}"}, status=404)
        return web.json_response(message)

    async def shift(self, request: web.Request) -> web.Response:
        def read(s: Store) -> dict[str, Any]:
            known = shift_numbers.shifts(s)
            chosen = request.query.get("shift") or (known[0] if known else "")
            return {"shifts": known, "shift": chosen, "rows": shift_numbers.numbers(s, chosen)}

        return web.json_response(await self.db(read))

    async def shift_csv(self, request: web.Request) -> web.Response:
        def read(s: Store) -> tuple[str, str]:
            known = shift_numbers.shifts(s)
            chosen = request.query.get("shift") or (known[0] if known else "")
            return chosen, shift_numbers.to_csv(shift_numbers.numbers(s, chosen))

        chosen, text = await self.db(read)
        name = f"pit-{self.config.site.id}-{chosen.replace(' ', 'T').replace(':', '')}.csv"
        return web.Response(
            text=text,
            content_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    async def shift_report(self, request: web.Request) -> web.Response:
        if self.report_key is None:
            return web.json_response({"error": "no [shift] report_key_file configured"}, status=409)
        key = self.report_key

        def make(s: Store) -> dict[str, Any]:
            known = shift_numbers.shifts(s)
            chosen = request.query.get("shift") or (known[0] if known else "")
            return shift_numbers.report(s, chosen, key, "report", self.config.site.id)

        return web.json_response(await self.db(make))

    async def protection(self, request: web.Request) -> web.Response:
        shufflers = self.config.protection.shufflers
        pools = await self.db(lambda s: s.pooled_protection(shufflers))
        return web.json_response({"pools": pools})

    async def events(self, request: web.Request) -> web.StreamResponse:
        """The live stream: the whole floor at once (also right after a reconnect), then the
        tiles that changed."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        queue: asyncio.Queue[str] = asyncio.Queue()
        self.hub.queues.add(queue)
        try:
            tiles = await self.db(lambda s: s.tiles())
            floor = json.dumps({"site": self.config.site.id, "tiles": tiles, "at": time.time()})
            await response.write(f"retry: 1000\nevent: floor\ndata: {floor}\n\n".encode())
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), 15)
                except TimeoutError:
                    item = ": ping\n\n"
                if not item:  # the pit is stopping
                    break
                await response.write(item.encode())
        except ConnectionResetError:  # the browser went away; a cancellation goes on up
            return response
        finally:
            self.hub.queues.discard(queue)
        return response

    async def acknowledge(self, request: web.Request) -> web.Response:
        """A table's latched alarm acknowledged from the pit: a signed ``acknowledge_alarm``
        naming the supervisor, published to the table's command topic."""
        body = await _json(request)
        table_id, alarm_id = str(body.get("table_id", "")), str(body.get("alarm_id", ""))
        by, note = str(body.get("by", "")).strip(), str(body.get("note", ""))[:200]
        allowed = self.config.commands.supervisors
        if not by or len(by) > 64:
            return web.json_response({"error": "name the supervisor (by)"}, status=400)
        if allowed and by not in allowed:
            return web.json_response({"error": f"{by!r} is not a supervisor here"}, status=403)
        if self.command_key is None:
            return web.json_response(
                {"error": "the pit has no command key ([commands] key_file)"}, status=409
            )
        tile = await self.db(lambda s: s.tiles([table_id]))
        if not tile:
            return web.json_response({"error": f"no table {table_id}"}, status=404)
        from controller.mqtt.signing import sign

        request_id = f"pit-{uuid.uuid4().hex[:16]}"
        fields = {"alarm_id": alarm_id, "by": by, "note": note, "request_id": request_id}
        signed = sign(
            self.command_key, self.config.commands.key_id, "acknowledge_alarm", fields,
            datetime.now(UTC), table_id=table_id,
        )  # fmt: skip
        text = json.dumps(signed, separators=(",", ":"))
        topic = f"{tile[0]['prefix']}cmd/acknowledge_alarm"
        await publish_command(self.config, topic, text.encode())
        await self.db(lambda s: s.note_command(request_id, table_id, "acknowledge_alarm", by, text))
        log.info("pit_command_sent table=%s kind=acknowledge_alarm by=%s", table_id, by)
        return web.json_response({"ok": True, "request_id": request_id, "topic": topic})

    async def record_ack(self, request: web.Request) -> web.Response:
        body = await _json(request)
        by, alarm = str(body.get("by", "")).strip(), str(body.get("id", ""))
        allowed = self.config.commands.supervisors
        if not by or (allowed and by not in allowed):
            return web.json_response({"error": "name a supervisor (by)"}, status=403)
        done = await self.db(lambda s: s.acknowledge_record_alarm(alarm, by))
        if done:
            self.hub.touch(alarm.split(":", 1)[0])
        return web.json_response({"ok": done})

    # --- serving ---------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.add_routes(
            [
                web.get("/", self._page("pit.html")),
                web.get("/table/{table_id}", self._page("table.html")),
                web.get("/login", self._page("login.html")),
                web.post("/api/login", self.login),
                web.get("/api/floor", self.floor),
                web.get("/api/table/{table_id}", self.table),
                web.get("/api/round/{round_id}", self.round_),
                web.get("/api/shift", self.shift),
                web.get("/api/shift.csv", self.shift_csv),
                web.get("/api/shift/report", self.shift_report),
                web.get("/api/events", self.events),
                web.get("/api/protection", self.protection),
                web.post("/api/acknowledge", self.acknowledge),
                web.post("/api/record-ack", self.record_ack),
                web.get("/static/common.css", self._common("common.css")),
                web.get("/static/favicon.svg", self._common("favicon.svg")),
                web.static("/static", STATIC),
            ]
        )
        return app

    def _common(self, name: str) -> Callable[[web.Request], Awaitable[web.FileResponse]]:
        async def serve(request: web.Request) -> web.FileResponse:
            return web.FileResponse(TABLE_STATIC / name)

        return serve

    async def run(self, stop: asyncio.Event) -> None:
        hub = asyncio.create_task(self.hub.run(), name="pit-hub")
        self.runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=2.0)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.config.web.host, self.config.web.port)
        await site.start()
        port = self.runner.addresses[0][1]
        host = self.config.web.host
        self.url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        log.info("pit_web_listening url=%s token=%s", self.url, self.token is not None)
        self.started.set()
        try:
            await stop.wait()
        finally:
            for q in list(self.hub.queues):  # end the live streams; pages reconnect
                q.put_nowait("")
            hub.cancel()
            with contextlib.suppress(BaseException):
                await hub
            await self.runner.cleanup()

            def close() -> None:
                if self._store is not None:
                    self._store.close()

            await asyncio.get_running_loop().run_in_executor(self._executor, close)
            self._executor.shutdown(wait=True)


async def _json(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


async def publish_command(config: PitConfig, topic: str, payload: bytes) -> None:
    """One command, QoS 1, on a short connection of its own (not the ingest's session)."""
    import aiomqtt

    from controller.mqtt.wire import NODELAY

    b = config.broker
    password = read_secret(b.password_file) if b.password_file else None
    async with aiomqtt.Client(
        b.host, b.port, username=b.username, password=password, socket_options=NODELAY,
        identifier=f"{b.client_id}-cmd-{uuid.uuid4().hex[:6]}", timeout=10,
    ) as client:  # fmt: skip
        await client.publish(topic, payload, qos=1)


@contextlib.asynccontextmanager
async def serving(web_: PitWeb) -> AsyncIterator[PitWeb]:
    stop = asyncio.Event()
    task = asyncio.create_task(web_.run(stop))
    await web_.started.wait()
    try:
        yield web_
    finally:
        stop.set()
        await task
