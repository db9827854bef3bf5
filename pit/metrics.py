"""The pit's Prometheus metrics (docs/operations.md "Monitoring"), served by its web server at
``/metrics`` behind the page's own rules (the bearer token where one is configured), in the
exposition format of Prometheus' own client.

What happens is counted as each batch is stored (messages by outcome, rejects by reason, gaps,
record alarms, each batch's size and time, the lag from a table's envelope time to its message
being stored) and as the page's database answers (each call's time). What the floor *is* (the
tables by state, gaps still open, record alarms unacknowledged, the links to the broker and the
database, how far the pit is behind, the pages connected) is read when Prometheus asks. Every
label is bounded: a reject reason is its code (``bad_signature``) and only the first
``MAX_REASONS`` codes seen get a label of their own (the rest are ``other``: a topic is anyone's
to write to); never a table id — a floor of 2,000 tables is 2,000 series per metric, which
belongs in the pit's database and page, not in Prometheus.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from aiohttp import web
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from pit.store import Outcome

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Reject codes with a label of their own; later ones are counted as ``other``.
MAX_REASONS = 32
_CODE = re.compile(r"[a-z][a-z0-9_]{0,39}")
#: The tables' states as the page shows them (``pit.pages``).
STATES = ("online", "silent", "offline", "closed", "fault", "unknown")

SECONDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SIZES = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


class PitMetrics:
    """The pit's registry. The ingest calls :meth:`batch`, the page's database
    :meth:`database_call`; :meth:`exposition` renders them with the state read at a scrape."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        self.messages = Counter(
            "paigow_pit_messages",
            "Messages by outcome: received, stored, duplicate, rejected, ignored (commands and "
            "replies), dropped (over a table's admission budget), awaiting_key",
            ["outcome"],
            registry=registry,
        )
        self.rejects = Counter(
            "paigow_pit_rejects", "Rejected messages by reason code", ["reason"], registry=registry
        )
        self.gaps = Counter(
            "paigow_pit_gaps",
            "Missing sequence numbers reported, and filled later",
            ["event"],
            registry=registry,
        )
        self.record_alarms = Counter(
            "paigow_pit_record_alarms",
            "Record-level alarms raised (a silent table, a gap not filled, …), by kind",
            ["kind"],
            registry=registry,
        )
        self.batch_size = Histogram(
            "paigow_pit_batch_messages",
            "Messages in each batch stored",
            buckets=SIZES,
            registry=registry,
        )
        self.batch_seconds = Histogram(
            "paigow_pit_batch_seconds",
            "A batch's time in the database (judging, storing, projecting, one commit)",
            buckets=SECONDS,
            registry=registry,
        )
        self.lag = Histogram(
            "paigow_pit_ingest_lag_seconds",
            "From a table's envelope time to its message stored (the newest of each table in "
            "each batch): the broker, the pit and the clocks between them",
            buckets=SECONDS,
            registry=registry,
        )
        self.db_seconds = Histogram(
            "paigow_pit_database_call_seconds",
            "Database calls by role: ingest (a batch: judged, stored, projected, one commit) "
            "and page (the page's queries and its writes), each in its own thread",
            ["role"],
            buckets=SECONDS,
            registry=registry,
        )
        for outcome in ("received", "stored", "duplicate", "rejected", "ignored", "dropped"):
            self.messages.labels(outcome)
        for event in ("reported", "filled"):
            self.gaps.labels(event)
        self._reasons: set[str] = set()
        self._state = _FloorCollector()
        registry.register(self._state)

    # --- what happens ----------------------------------------------------------------------

    def batch(self, outcome: Outcome, received: int, seconds: float, now: float) -> None:
        """A batch of ``received`` messages stored in ``seconds`` (``now``: the pit's clock)."""
        m = self.messages
        m.labels("received").inc(received)
        m.labels("stored").inc(outcome.stored)
        m.labels("duplicate").inc(outcome.duplicates)
        m.labels("rejected").inc(outcome.rejected)
        m.labels("ignored").inc(outcome.ignored)
        m.labels("dropped").inc(outcome.dropped)
        if outcome.awaiting:
            m.labels("awaiting_key").inc(outcome.awaiting)
        for _table, reason in outcome.rejects:
            self.rejects.labels(self._reason(reason)).inc()
        self.gaps.labels("reported").inc(len(outcome.gaps_reported))
        self.gaps.labels("filled").inc(len(outcome.gaps_filled))
        for alarm in outcome.alarms:
            self.record_alarms.labels(self._reason(str(alarm.get("kind", "")))).inc()
        self.batch_size.observe(received)
        self.batch_seconds.observe(seconds)
        self.db_seconds.labels("ingest").observe(seconds)
        for sent in outcome.sent.values():
            lag = _lag(sent, now)
            if lag is not None:
                self.lag.observe(lag)

    def database_call(self, role: str, seconds: float) -> None:
        self.db_seconds.labels(role).observe(seconds)

    def _reason(self, text: str) -> str:
        """A reject's or an alarm's code as a label (bounded, see the module's note)."""
        code = text.split(":", 1)[0].strip()
        if not _CODE.fullmatch(code):
            return "other"
        if code not in self._reasons:
            if len(self._reasons) >= MAX_REASONS:
                return "other"
            self._reasons.add(code)
        return code

    # --- the floor, read at a scrape -------------------------------------------------------

    async def exposition(self, read_floor: Callable[[], Any], live: Mapping[str, float]) -> bytes:
        """``read_floor()``: awaitable of :meth:`pit.pages.PageQueries.monitoring`'s figures
        (from the page's database thread); ``live``: what the pit knows in memory (links,
        how far behind, pages connected)."""
        floor = await read_floor()
        self._state.floor, self._state.live = floor, dict(live)
        return generate_latest(self.registry)


def _lag(sent: str, now: float) -> float | None:
    try:
        return max(now - datetime.fromisoformat(sent).timestamp(), 0.0)
    except ValueError:
        return None


class _FloorCollector:
    def __init__(self) -> None:
        self.floor: Mapping[str, Any] = {}
        self.live: Mapping[str, float] = {}

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        floor, live = self.floor, self.live
        if "states" in floor:
            tables = GaugeMetricFamily(
                "paigow_pit_tables", "Tables by the state the page shows", labels=["state"]
            )
            states = floor["states"]
            for state in STATES:
                tables.add_metric([state], float(states.get(state, 0)))
            yield tables
        for key, name, help_text in FLOOR_GAUGES:
            if key in floor:
                yield GaugeMetricFamily(name, help_text, value=float(floor[key]))
        if "alarms_by_kind" in floor:
            waiting = GaugeMetricFamily(
                "paigow_pit_record_alarms_waiting",
                "Record alarms not yet acknowledged, by kind",
                labels=["kind"],
            )
            for kind, n in sorted(floor["alarms_by_kind"].items()):
                waiting.add_metric([kind], float(n))
            yield waiting
        for key, name, help_text in LIVE_GAUGES:
            if key in live:
                yield GaugeMetricFamily(name, help_text, value=float(live[key]))
        if "floor_reads" in live:
            yield CounterMetricFamily(
                "paigow_pit_page_floor_reads",
                "Reads of the whole floor for the live pages (a connect is sent the kept tiles)",
                value=live["floor_reads"],
            )


FLOOR_GAUGES = (
    ("gaps_open", "paigow_pit_gaps_open", "Missing sequence numbers not yet filled"),
    ("awaiting", "paigow_pit_messages_awaiting_key", "Messages kept until their key is known"),
    ("oldest_gap_s", "paigow_pit_gap_oldest_seconds", "Age of the oldest gap still open"),
)
LIVE_GAUGES = (
    ("broker_up", "paigow_pit_broker_connected", "1 while the pit is subscribed to the broker"),
    ("database_up", "paigow_pit_database_up", "1 while the page's database answers"),
    ("behind_s", "paigow_pit_behind_seconds", "How far the pit is behind the broker (0: not)"),
    ("page_clients", "paigow_pit_page_clients", "Live page streams open"),
    ("scraped_at", "paigow_pit_scrape_timestamp_seconds", "When this scrape was read (epoch)"),
)


def live_figures(web: Any, behind: Callable[[float], float] | None) -> dict[str, float]:
    """What the pit knows in memory, for :meth:`PitMetrics.exposition`."""
    now = time.time()
    links = web.links.up
    if web.connected is not None:
        links = {**links, "broker": web.connected.is_set()}
    return {
        "broker_up": float(links.get("broker", False)),
        "database_up": float(links.get("database", False)),
        "behind_s": float(behind(now)) if behind is not None else 0.0,
        "page_clients": float(len(web.hub.queues)),
        "floor_reads": float(web.hub.floor_reads),
        "scraped_at": now,
    }


#: Answered to loopback without a token (a monitor on the pit's own computer, a load balancer's
#: probe through a local agent); from elsewhere they are pages like any (``pit.gate``).
HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
#: Asked for by programs: refused with a status (401), never redirected to the login page.
MACHINE_PATHS = HEALTH_PATHS | {"/metrics"}


def monitoring_routes(pit_web: Any) -> list[web.RouteDef]:
    """``/healthz`` (the loop answers), ``/readyz`` (the broker subscribed and the database
    answering: 503 with the reasons otherwise) and ``/metrics`` (404 where not served)."""

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        # The subscription as the ingest holds it now; the database as last probed (every 0.5 s).
        connected = pit_web.connected
        up = {**pit_web.links.up, **({} if connected is None else {"broker": connected.is_set()})}
        reasons = [
            f"{name} {why}"
            for name, why in (("broker", "not subscribed"), ("database", "not answering"))
            if not up.get(name, False)
        ]
        body = {"status": "ready" if not reasons else "not_ready", "reasons": reasons}
        return web.json_response(body, status=200 if not reasons else 503)

    async def metrics(request: web.Request) -> web.Response:
        served: PitMetrics | None = pit_web.metrics
        if served is None:
            raise web.HTTPNotFound(text="metrics are not served by this pit")
        from pit.pages import floor_figures

        body = await served.exposition(
            lambda: pit_web.db(lambda s: floor_figures(s.db)),
            live_figures(pit_web, pit_web.behind),
        )
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    return [web.get("/healthz", healthz), web.get("/readyz", readyz), web.get("/metrics", metrics)]
