"""The pit page (aiohttp): a tile per table, a table's detail and recall, live over server-sent
events, the shift's numbers and their CSV; acknowledging an alarm takes a supervisor's badge and
PIN and sends the table a signed ``acknowledge_alarm`` naming that badge.

Access (``pit.access``): every request must name an allowed Host; every change is same-origin
JSON. On a loopback address without a token the page is open to the machine only; with ``[web]
token_file`` (required on any other address) a person logs in with the token once (a JSON body,
never a URL: a ``token`` in a query string is refused) and gets a session cookie kept
server-side (revoked at logout); programs send ``Authorization: Bearer <token>``. Tokens, PINs
and sessions are never logged. Live streams are capped (``[web] max_streams``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson
from aiohttp import web

import controller
from pit import shift as shift_numbers
from pit.broker import BrokerError, link, publish_once
from pit.config import PitConfig, read_hex_key
from pit.db import Outcome
from pit.floorwatch import floor_view
from pit.gate import Gate, json_body
from pit.metrics import PitMetrics, monitoring_routes
from pit.pagedb import PageDatabase, PageStore

log = logging.getLogger("pit.web")
T = TypeVar("T")

STATIC = Path(__file__).parent / "static"
#: The table pages' shared look (common.css, the favicon), served as they are.
TABLE_STATIC = Path(controller.__file__).resolve().parent / "display" / "static"


class Links:
    """The pit's own links, as the page's banner shows them: up or down, and since when (the
    pit's clock, epoch seconds)."""

    def __init__(self, now: float) -> None:
        # "ingest": the pit keeps up with what the broker gives it (down: it is behind).
        self.up = {"broker": False, "database": True, "ingest": True}
        self.since = {"broker": now, "database": now, "ingest": now}

    def set(self, name: str, up: bool, now: float) -> bool:
        if self.up[name] == up:
            return False
        self.up[name], self.since[name] = up, now
        return True

    def as_dict(self) -> dict[str, Any]:
        return {name: {"up": self.up[name], "since": self.since[name]} for name in self.up}


#: Pushes a page may leave unread before its stream is ended (:meth:`Hub.drop`): ten seconds of
#: pushes at the 0.1 s interval.
STALLED = 100
#: Seconds between the Hub's reads of the whole floor once a page has asked for it: the counts
#: that age without a message (rounds in the last hour, a gap past its grace), what another pit
#: on the same database stored, a change no batch announced; only the tiles that differ are pushed.
FLOOR_REFRESH = 60.0
#: Seconds before a whole read the database did not answer is tried again (the links' watch
#: asks at once when the database is back: :meth:`Hub.renew`).
FLOOR_RETRY = 2.0

Tiles = list[dict[str, Any]]


class Hub:
    """Fans committed batches out to the live pages: the tables a batch changed are read again
    (at most every ``interval`` s) and only they are sent to every open event stream. The Hub
    keeps the latest tile of every table (:attr:`floor`, from the first page's first read on),
    so a page that connects or reconnects is sent that snapshot with no read of the database;
    the whole floor is read again every ``refresh`` s and what differs is pushed.

    ``read(None)`` is the whole floor, ``read(ids)`` those tables' tiles; either raises when the
    database does not answer (the tables are then read at the next step)."""

    def __init__(
        self, read: Callable[[list[str] | None], Awaitable[Tiles]], refresh: float = FLOOR_REFRESH
    ) -> None:
        self.read = read
        self.refresh = refresh
        self.queues: set[asyncio.Queue[str]] = set()
        self.dirty: set[str] = set()
        self.sent: dict[str, str] = {}
        self.alarms: list[dict[str, Any]] = []
        self.wake = asyncio.Event()
        self.interval = 0.1
        self.pushed = 0
        #: every table's latest tile, by table id; None until a page asks for the floor
        self.floor: dict[str, dict[str, Any]] | None = None
        #: when the whole floor was last read (monotonic), and how many times it was
        self.refreshed = -math.inf
        self.floor_reads = 0
        self._reading = asyncio.Lock()
        self._failing = False  # said once an outage, not at every try

    def on_batch(self, outcome: Outcome) -> None:
        self.dirty |= outcome.tables
        for table, when in outcome.sent.items():
            self.sent[table] = max(self.sent.get(table, ""), when)
        self.alarms += outcome.alarms
        if outcome.tables or outcome.alarms:
            self.wake.set()

    def link(self, links: dict[str, Any]) -> None:
        """The pit's links changed: every page hears it at once."""
        event = json.dumps({"links": links, "at": time.time()})
        for q in list(self.queues):
            q.put_nowait(f"event: link\ndata: {event}\n\n")

    def touch(self, table_id: str) -> None:
        self.dirty.add(table_id)
        self.wake.set()

    def renew(self) -> None:
        """Read the whole floor at the next step (the database is back: what it holds may
        have changed while the pit could not read it)."""
        self.refreshed = -math.inf
        self.wake.set()

    async def snapshot(self) -> Tiles:
        """Every table's latest tile: what the Hub keeps, read from the database only the
        first time a page asks (raises if it does not answer then)."""
        if self.floor is None:
            await self._read_floor()
        assert self.floor is not None
        return list(self.floor.values())

    async def _read_floor(self) -> Tiles:
        """The whole floor read again; the tiles that differ from what was kept."""
        asked = time.monotonic()
        async with self._reading:
            if self.floor is not None and self.refreshed >= asked:  # read meanwhile
                return []
            tiles = await self.read(None)
            old = self.floor
            if old is None:
                old = {}
                self.wake.set()  # the Hub's next whole read is due ``refresh`` s from now
            self.floor = {t["table_id"]: t for t in tiles}
            self.refreshed = time.monotonic()
            self.floor_reads += 1
            return [t for t in tiles if old.get(t["table_id"]) != t]

    async def _changed(self, dirty: list[str]) -> Tiles | None:
        """The tiles to push this step (the dirty tables', or what differs after the whole
        floor's read when it is due); None if the database did not answer."""
        try:
            if self.floor is not None and time.monotonic() - self.refreshed >= self.refresh:
                tiles = await self._read_floor()
            elif dirty:
                tiles = await self.read(dirty)
                if self.floor is not None:
                    for tile in tiles:
                        self.floor[tile["table_id"]] = tile
            else:
                return []
        except Exception as exc:
            if not self._failing:  # once an outage, not at every try
                log.warning("pit_web_read_failed: %s", type(exc).__name__)
            self._failing = True
            self.dirty.update(dirty)  # read at the next step
            if self.floor is not None:  # the whole read again in FLOOR_RETRY s, not at once
                self.refreshed = max(self.refreshed, time.monotonic() - self.refresh + FLOOR_RETRY)
            return None
        if self._failing:
            log.info("pit_web_read_back")
            self._failing = False
        return tiles

    async def run(self) -> None:
        last = -math.inf
        while True:
            due = None if self.floor is None else self.refreshed + self.refresh - time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), None if due is None else max(due, 0))
            self.wake.clear()
            # At most every ``interval`` s, and at once when the last push is older: a
            # batch gathered for ``batch_wait`` (issue 31) is not held back another interval.
            wait = self.interval - (time.monotonic() - last)
            if wait > 0:
                await asyncio.sleep(wait)
            last = time.monotonic()
            dirty, self.dirty = sorted(self.dirty), set()
            sent, self.sent = self.sent, {}
            alarms, self.alarms = self.alarms, []
            if self.floor is None and not self.queues:
                continue  # no page has asked for the floor yet: nothing to keep
            tiles = await self._changed(dirty)
            if not self.queues or (not tiles and not sent and not alarms):
                continue
            try:
                event = orjson.dumps(
                    {"tiles": tiles or [], "sent": sent, "alarms": alarms, "at": time.time()}
                ).decode()  # a few hundred tiles a second at 2,000 tables: orjson (issue 31)
            except TypeError as exc:  # a value no JSON takes: said, and the stream goes on
                log.error("pit_web_event_failed: %s (tables %s)", exc, ", ".join(dirty[:10]))
                continue
            self.pushed += 1
            for q in list(self.queues):
                if q.qsize() > STALLED:
                    self.drop(q)
                    continue
                q.put_nowait(f"event: tiles\ndata: {event}\n\n")

    def drop(self, queue: asyncio.Queue[str]) -> None:
        """A stalled page (``STALLED`` pushes unread): what it has not read is thrown away and
        its stream is ended (the empty item), so the browser reconnects and is sent the whole
        floor again. Only taken off the list, its stream stayed open on pings alone and the
        page never heard a change again (the likely cause of a CI run's table page waiting
        over a minute, on a loaded machine, for an alarm's acknowledgement)."""
        self.queues.discard(queue)
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait("")


class PitWeb:
    def __init__(
        self,
        config: PitConfig,
        make_store: Callable[[], PageStore],
        connected: asyncio.Event | None = None,
        behind: Callable[[float], float] | None = None,
    ) -> None:
        self.config = config
        self.connected = connected  # the ingest's: set while subscribed to the broker
        self.behind = behind  # the ingest's: how far it is behind the broker, in seconds
        self.links = Links(time.time())
        self.database = PageDatabase(make_store)
        self.gate = Gate(config, self.database)
        self.hub = Hub(self._read_tiles)
        self.command_key: bytes | None = None
        if config.commands.key_file is not None:
            self.command_key = read_hex_key(config.commands.key_file)
        self.report_key: bytes | None = None
        if config.shift.report_key_file is not None:
            self.report_key = read_hex_key(config.shift.report_key_file)
        self.runner: web.AppRunner | None = None
        #: ``/metrics`` (``pit.metrics``), set by the pit; None: not served
        self.metrics: PitMetrics | None = None
        self.url = ""
        self.started = asyncio.Event()

    @property
    def refused(self) -> int:
        """Requests refused by the Host or same-origin checks (``pit.gate``)."""
        return self.gate.refused

    async def db(self, fn: Callable[[PageStore], T]) -> T:
        return await self.database.call(fn)

    async def watch_links(self, stop: asyncio.Event, every: float = 0.5) -> None:
        """The broker's link (the ingest subscribed) and the database's, every ``every`` s; a
        change goes to every page at once."""
        while not stop.is_set():
            now = time.time()
            answers = await self.database.answers()
            changed = self.links.set("database", answers, now)
            if changed and answers:  # back: read the whole floor again
                self.hub.renew()
            if self.connected is not None:
                changed |= self.links.set("broker", self.connected.is_set(), now)
            if self.behind is not None:
                changed |= self.links.set("ingest", self.behind(now) == 0, now)
            if changed:
                log.info("pit_links %s", json.dumps(self.links.as_dict()))
                self.hub.link(self.links.as_dict())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)

    async def _read_tiles(self, tables: list[str] | None) -> list[dict[str, Any]]:
        """The tiles of ``tables`` (None: every table), for the Hub; raises if the database
        does not answer."""
        return await self.db(lambda s: s.pages.tiles(tables))

    # --- pages and data --------------------------------------------------------------------

    async def floor(self, request: web.Request) -> web.Response:
        return web.json_response(self._floor(await self.hub.snapshot()))

    def _floor(self, tiles: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "site": self.config.site.id,
            "tiles": tiles,
            "links": self.links.as_dict(),
            "timezone": self.config.shift.timezone,
            "at": time.time(),
        }

    async def links_(self, request: web.Request) -> web.Response:
        return web.json_response({"links": self.links.as_dict(), "at": time.time()})

    async def table(self, request: web.Request) -> web.Response:
        tid = request.match_info["table_id"]
        detail = await self.db(lambda s: s.pages.table_detail(tid))
        if detail is None:
            return web.json_response({"error": f"no table {tid}"}, status=404)
        return web.json_response(
            detail | {"timezone": self.config.shift.timezone, "at": time.time()}
        )

    async def round_(self, request: web.Request) -> web.Response:
        rid = request.match_info["round_id"]
        message = await self.db(lambda s: s.pages.round_message(rid))
        if message is None:
            return web.json_response({"error": f"no round {rid}"}, status=404)
        return web.json_response(message)

    async def shift(self, request: web.Request) -> web.Response:
        def read(s: PageStore) -> dict[str, Any]:
            known = shift_numbers.shifts(s.pages)
            chosen = request.query.get("shift") or (known[0] if known else "")
            return {
                "shifts": known,
                "shift": chosen,
                "rows": shift_numbers.numbers(s.pages, chosen),
            }

        # The zone the shift is named in, with it: the page labels it whatever came first.
        answer = await self.db(read) | {"timezone": self.config.shift.timezone}
        return web.json_response(answer)

    async def shift_csv(self, request: web.Request) -> web.Response:
        def read(s: PageStore) -> tuple[str, str]:
            known = shift_numbers.shifts(s.pages)
            chosen = request.query.get("shift") or (known[0] if known else "")
            return chosen, shift_numbers.to_csv(shift_numbers.numbers(s.pages, chosen))

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

        def make(s: PageStore) -> dict[str, Any]:
            known = shift_numbers.shifts(s.pages)
            chosen = request.query.get("shift") or (known[0] if known else "")
            return shift_numbers.report(s.pages, chosen, key, "report", self.config.site.id)

        return web.json_response(await self.db(make))

    async def protection(self, request: web.Request) -> web.Response:
        shufflers = self.config.protection.shufflers

        def read(s: PageStore) -> dict[str, Any]:
            return {"pools": s.pages.pooled_protection(shufflers), "floor": floor_view(s.db)}

        return web.json_response(await self.db(read))

    async def events(self, request: web.Request) -> web.StreamResponse:
        """The live stream: the whole floor at once (also right after a reconnect: the Hub's
        snapshot, not a read of the database), then the tiles that changed."""
        if len(self.hub.queues) >= self.config.web.max_streams:
            return self.gate.refuse(request, 503, "too many live pages open: try again later")
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        queue: asyncio.Queue[str] = asyncio.Queue()
        self.hub.queues.add(queue)
        try:
            try:
                tiles = await self.hub.snapshot()  # kept by the Hub: no read a reconnect
                first = f"event: floor\ndata: {orjson.dumps(self._floor(tiles)).decode()}"
            except Exception as exc:  # the database is away: the page keeps its tiles, and
                log.warning("pit_web_read_failed: %s", type(exc).__name__)  # shows the banner
                links = json.dumps({"links": self.links.as_dict(), "at": time.time()})
                first = f"event: link\ndata: {links}"
            await response.write(f"retry: 1000\n{first}\n\n".encode())
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
        body = await json_body(request)
        table_id, alarm_id = str(body.get("table_id", "")), str(body.get("alarm_id", ""))
        note = str(body.get("note", ""))[:200]
        by = await self.gate.supervisor(request, body)
        if isinstance(by, web.Response):
            return by
        if self.command_key is None:
            return web.json_response(
                {"error": "the pit has no command key ([commands] key_file)"}, status=409
            )
        tile = await self.db(lambda s: s.pages.tiles([table_id]))
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
        try:
            await publish_command(self.config, topic, text.encode())
        except BrokerError as exc:  # not sent: said to the supervisor, nothing noted
            log.error("pit_command_failed table=%s kind=acknowledge_alarm: %s", table_id, exc)
            return web.json_response({"error": f"not sent to the table: {exc}"}, status=502)
        await self.db(
            lambda s: s.sessions.note_command(request_id, table_id, "acknowledge_alarm", by, text)
        )
        log.info("pit_command_sent table=%s kind=acknowledge_alarm by=%s", table_id, by)
        return web.json_response({"ok": True, "request_id": request_id, "topic": topic})

    async def record_ack(self, request: web.Request) -> web.Response:
        body = await json_body(request)
        alarm = str(body.get("id", ""))
        by = await self.gate.supervisor(request, body)
        if isinstance(by, web.Response):
            return by
        done = await self.db(lambda s: s.sessions.acknowledge_record_alarm(alarm, by))
        if done:
            self.hub.touch(alarm.split(":", 1)[0])
        return web.json_response({"ok": done})

    # --- serving ---------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.gate.guard])
        app.add_routes(
            [
                web.get("/", _file(STATIC / "pit.html")),
                web.get("/table/{table_id}", _file(STATIC / "table.html")),
                web.get("/login", _file(STATIC / "login.html")),
                web.post("/api/login", self.gate.login),
                web.post("/api/logout", self.gate.logout),
                web.get("/api/floor", self.floor),
                web.get("/api/links", self.links_),
                web.get("/api/table/{table_id}", self.table),
                web.get("/api/round/{round_id}", self.round_),
                web.get("/api/shift", self.shift),
                web.get("/api/shift.csv", self.shift_csv),
                web.get("/api/shift/report", self.shift_report),
                web.get("/api/events", self.events),
                web.get("/api/protection", self.protection),
                web.post("/api/acknowledge", self.acknowledge),
                web.post("/api/record-ack", self.record_ack),
                web.get("/static/common.css", _file(TABLE_STATIC / "common.css")),
                web.get("/static/favicon.svg", _file(TABLE_STATIC / "favicon.svg")),
                web.get("/static/common.js", _file(TABLE_STATIC / "common.js")),
                web.static("/static", STATIC),
                *monitoring_routes(self),
            ]
        )
        return app

    async def run(self, stop: asyncio.Event) -> None:
        hub = asyncio.create_task(self.hub.run(), name="pit-hub")
        watch = asyncio.create_task(self.watch_links(stop), name="pit-links")
        self.runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=2.0)
        await self.runner.setup()
        tls = _tls(self.config)
        site = web.TCPSite(self.runner, self.config.web.host, self.config.web.port, ssl_context=tls)
        await site.start()
        port = self.runner.addresses[0][1]
        host = self.config.web.host
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"
        log.info("pit_web_listening url=%s token=%s", self.url, self.gate.token is not None)
        self.started.set()
        try:
            await stop.wait()
        finally:
            for q in list(self.hub.queues):  # end the live streams; pages reconnect
                q.put_nowait("")
            hub.cancel()
            watch.cancel()
            with contextlib.suppress(BaseException):
                await hub
            with contextlib.suppress(BaseException):
                await watch
            await self.runner.cleanup()
            await self.database.close()


def _file(path: Path) -> Callable[[web.Request], Awaitable[web.FileResponse]]:
    async def serve(request: web.Request) -> web.FileResponse:
        return web.FileResponse(path)

    return serve


def _tls(config: PitConfig) -> ssl.SSLContext | None:
    w = config.web
    if w.cert_file is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(w.cert_file, w.key_file)
    return context


async def publish_command(config: PitConfig, topic: str, payload: bytes) -> None:
    """One command, QoS 1, on a short connection of its own (not the ingest's session), on the
    pit's broker settings (TLS and MQTT version included); BrokerError if it was not taken."""
    await publish_once(link(config, subscriber=False), topic, payload)


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
