"""``paigow-table pit run``: the ingest and the pit page in one process, until SIGTERM.

The pit knows its own links (the page's banner reads them, ``PitWeb.links``): the broker is up
while the ingest is subscribed, the database while the page's own connection answers. With a
link down the ingest retries every second or so; its warnings are backed off
(:class:`LogThrottle`): the first at once, then at most one a 1, 2, 4 … 60 s, each saying how many
it stands for, and the count starts again once the link is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from pit.config import PitConfig, PitConfigError, read_hex_key
from pit.db import down_reason, name_thread
from pit.floorwatch import FloorProcess, budget_of
from pit.ingest import Ingest
from pit.keys import FeedKeys
from pit.pagedb import PageStore
from pit.store import STATUS_GAP_GRACE, Limits, Outcome, Shifts, Store, migrate
from pit.web import PitWeb

log = logging.getLogger("pit")


def store_limits(config: PitConfig) -> Limits:
    r = config.record
    return Limits(
        max_bytes=config.broker.max_message_bytes,
        max_seq_jump=r.max_seq_jump,
        clock_tolerance=r.clock_tolerance,
        max_age=config.broker.session_expiry + r.clock_tolerance,
        reject_burst=r.reject_burst,
        reject_window=r.reject_window,
        jump_gap_grace=STATUS_GAP_GRACE if config.broker.share_group else 0.0,
        checkpoint_grace=checkpoint_grace(config),
        retention_days=r.retention_days,
    )


def checkpoint_grace(config: PitConfig) -> float:
    """How long a skipped checkpoint waits before ``chain_skipped``: the gaps' grace for a pit
    of a shared group, and beyond, while the pit asks for lost seqs, until a resend of it has
    had time to come (``pit.liveness``)."""
    live = config.liveness
    resending = live.probe_after > 0 and live.resend_after > 0
    if not (resending or config.broker.share_group):
        return 0.0
    return STATUS_GAP_GRACE + (live.resend_after if resending else 0.0)


def feed_keys_of(config: PitConfig) -> FeedKeys:
    """The tables' registered feed keys (``[record] feed_keys_file``); PitConfigError for a
    file the pit cannot read."""
    path = config.record.feed_keys_file
    if path is None:
        log.warning("pit_no_feed_keys: [record] feed_keys_file is not set: every message refused")
        return FeedKeys()
    try:
        return FeedKeys(path=path)
    except (OSError, ValueError) as exc:
        raise PitConfigError(f"[record] feed_keys_file: {exc}") from None


def store_factory(config: PitConfig) -> Callable[[], Store]:
    default = (
        read_hex_key(config.record.checkpoint_key_file)
        if config.record.checkpoint_key_file
        else None
    )
    keys = {t: read_hex_key(p) for t, p in config.record.checkpoint_keys.items()}
    shifts = Shifts(config.shift.starts, config.shift.timezone)
    limits = store_limits(config)
    feed_keys = feed_keys_of(config)

    def make() -> Store:
        return Store(
            config.database_url,
            shifts=shifts,
            checkpoint_keys=keys,
            default_checkpoint_key=default,
            root=config.site.root,
            limits=limits,
            feed_keys=feed_keys,
        )

    return make


def page_store_factory(config: PitConfig) -> Callable[[], PageStore]:
    """The page's own store (``pit.pagedb``): its queries and sessions, never the ingest's."""
    limits = store_limits(config)
    return lambda: PageStore(config.database_url, limits)


#: Warnings of a link that is down, by the event that opens them; ``pit_subscribed`` ends them.
RETRY_EVENTS = ("pit_mqtt_lost", "pit_database_error", "pit_migrate_waiting", "pit_liveness_failed")
#: Lines a flood would repeat for every message (issue 40, F4): the first of each goes out, then
#: one per 1, 2, 4 … 60 s with how many it stands for. (The database keeps every one counted.)
FLOOD_EVENTS = ("pit_reject", "pit_record_alarm")
THROTTLE_MAX_S = 60.0


class LogThrottle(logging.Filter):
    """Lets the first warning of each retry event through, then one per 1, 2, 4 … 60 s with the
    number it stands for; a ``pit_subscribed`` (the links are back) starts over."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.clock = clock
        self.state: dict[str, tuple[float, float, int]] = {}  # event: (next, delay, held)

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        if text.startswith("pit_subscribed"):
            for retry in RETRY_EVENTS:  # the links are back; a flood's lines are not
                self.state.pop(retry, None)
            return True
        event = next((e for e in (*RETRY_EVENTS, *FLOOD_EVENTS) if text.startswith(e)), None)
        if event is None:
            return True
        now = self.clock()
        due, delay, held = self.state.get(event, (now, 0.5, 0))
        if now < due:
            self.state[event] = (due, delay, held + 1)
            return False
        delay = min(delay * 2, THROTTLE_MAX_S)
        self.state[event] = (now + delay, delay, 0)
        if held:
            at = datetime.now(UTC).strftime("%H:%M:%S UTC")
            record.msg = f"{record.msg} ({held} more like it held back; next at most in "
            record.msg += f"{delay:.0f} s, from {at})"
        return True


#: Allocations between collections of the young generation (Python's default: 700).
GC_YOUNG = 50_000


def settle_collector() -> None:
    """The garbage collector as the pit runs it once started (issue 31, docs/performance.md
    §6): what the program built to start (modules, schemas, the page's app: several hundred
    thousand objects that live as long as it does) leaves the cyclic collector's reach, since
    each full collection walked all of it again, about once a second at 2,000 tables; and the
    young generation is collected every ``GC_YOUNG`` allocations, not 700 (a batch makes tens
    of thousands of short-lived dicts, freed by their counts anyway). Garbage is still freed."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, 10, 10)


def install_throttle() -> LogThrottle:
    """The filter on the ingest's and the pit's loggers (once)."""
    throttle = LogThrottle()
    for name in ("pit.ingest", "pit"):
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, LogThrottle)]:
            logger.removeFilter(old)
        logger.addFilter(throttle)
    return throttle


class Pit:
    def __init__(self, config: PitConfig) -> None:
        self.config = config
        self.make_store = store_factory(config)
        self.ingest = Ingest(config, self.make_store, self._on_batch)
        self.web = (
            PitWeb(
                config,
                page_store_factory(config),
                connected=self.ingest.connected,
                behind=self.ingest.behind,
            )
            if config.web.enabled
            else None
        )

        #: the floor's pooled game protection (issue 44), stepped in a process of its own
        self.floor = (
            FloorProcess(
                config.database_url,
                budget_of(config.protection, lambda: len(feed_keys_of(config).tables())),
            )
            if config.protection.pooled
            else None
        )

        if self.web is not None:
            from pit.metrics import PitMetrics

            self.web.metrics = self.ingest.metrics = metrics = PitMetrics()
            self.web.database.timed = lambda seconds: metrics.database_call("page", seconds)

    def _on_batch(self, outcome: Outcome) -> None:
        if self.web is not None:
            self.web.hub.on_batch(outcome)

    async def run(self, stop: asyncio.Event) -> None:
        while True:  # the database may not be up yet when the pit starts
            try:
                applied = await asyncio.to_thread(migrate, self.config.database_url)
                break
            except Exception as exc:
                # The database's own reason (refused, no such database, a password), in a line.
                log.warning("pit_migrate_waiting %s", down_reason(self.config.database_url, exc))
                try:
                    await asyncio.wait_for(stop.wait(), 2.0)
                    return
                except TimeoutError:
                    continue
        if applied:
            log.info("pit_migrated %s", ",".join(applied))
        tasks = [asyncio.create_task(self.ingest.run(stop), name="pit-ingest")]
        if self.floor is not None:
            tasks.append(asyncio.create_task(self._floor_watch(stop), name="pit-floor"))
        if self.web is not None:
            tasks.append(asyncio.create_task(self.web.run(stop), name="pit-web"))
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _floor_watch(self, stop: asyncio.Event) -> None:
        """Every ``[protection] every`` s, the stored rounds into the floor's pools (its own
        process and connection, waited for from a thread: the ingest never waits for it). A
        failure is logged and tried again next time; the rounds wait in the database
        meanwhile."""
        floor = self.floor
        assert floor is not None
        executor = ThreadPoolExecutor(1, "pit-floor", initializer=name_thread("pit-floor-db"))
        loop = asyncio.get_running_loop()
        failing = False
        try:
            while not stop.is_set():
                try:
                    alarms = await loop.run_in_executor(executor, floor.step)
                    failing = False
                except Exception as exc:
                    if not failing:
                        log.warning("pit_floor_protection_failed %s: %s", type(exc).__name__, exc)
                    failing = True
                    alarms = []
                for alarm in alarms:
                    if self.web is not None:
                        self.web.hub.touch(alarm["table_id"])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.config.protection.every)
        finally:
            await loop.run_in_executor(executor, floor.close)
            executor.shutdown(wait=False)


async def run_pit(config: PitConfig, ready: Callable[[Pit], None] | None = None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    install_throttle()
    try:
        pit = Pit(config)
    except PitConfigError as exc:
        print(f"pit: {exc}", file=sys.stderr)
        return 78  # EX_CONFIG, which the unit does not restart on
    settle_collector()
    task = asyncio.create_task(pit.run(stop))
    if ready is not None:
        # READY once subscribed and listening; a stop before that (a broker that never
        # answers) ends the run, never waits for a connect that does not come.
        waiting = asyncio.ensure_future(_ready(pit))
        await asyncio.wait({waiting, task}, return_when="FIRST_COMPLETED")
        if waiting.done():
            ready(pit)
        else:
            waiting.cancel()
    await task
    return 0


async def _ready(pit: Pit) -> None:
    await pit.ingest.connected.wait()
    if pit.web is not None:
        await pit.web.started.wait()
