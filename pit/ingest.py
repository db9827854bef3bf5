"""The pit's subscriber: every table of the site, into the database, acknowledged after the commit.

- A persistent session: MQTT 5 with clean start off and a session expiry, or MQTT 3.1.1 with
  ``clean_session`` false, under a client id that stays the same across restarts
  (``[broker] client_id``). While the pit is away the broker keeps its messages.
- QoS 1 and manual acknowledgements (``pit.broker``, the pit's one room with an MQTT library):
  a message is acknowledged (PUBACK) only after the
  transaction that stored it committed. A crash, a database that went away or a lost link before
  that leaves it unacknowledged, and the broker sends it again on the next connect; the copy is
  then a duplicate by ``msg_id`` and stored no second time.
- Batches: what has arrived (up to ``[broker] batch``; after a batch's first message the pit
  waits ``batch_wait`` for more) is stored in one transaction, then acknowledged in the order
  it arrived (MQTT requires PUBACKs in order).
- A database error: the batch is not acknowledged, the MQTT connection is dropped (its session
  stays on the broker with the messages in flight), the database is retried after growing
  waits (``RETRY``), and the pit connects again once it answers.
- Several pits: ``[broker] share_group`` subscribes through ``$share/<group>/…``; each message
  goes to one member, all of them write the same PostgreSQL database (the per-table row is
  locked for the seq bookkeeping).
- No message stops the pit (issue 30): each is judged alone (``pit.judge``, a savepoint of its
  own); what fails is a reject, logged and acknowledged. Only the database itself failing is
  "database down".
- Every message is the table's own signed words (issue 30): its Ed25519 signature is checked
  under the key registered for the table of its topic (``[record] feed_keys_file``,
  ``pit.keys``, read again when it changes) before anything else uses it; what is not is a
  reject with a record alarm.
- Liveness: while connected, a table heard nothing from for ``[liveness] probe_after`` s is
  sent a ``status_request`` (signed with the pit's command key when it has one); one still
  silent after ``silent_after`` s (counted from the pit's own connect at the earliest) is
  marked silent with a record alarm (``pit.liveness``).
- A stop (SIGTERM) ends the run within about a second in every state: a connect that hangs or
  a broker that refuses is abandoned, not awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from drivers.base import Backoff
from pit.admission import Admission, Dropped
from pit.broker import BrokerError, Message, Session, link, topic_text
from pit.config import PitConfig, read_hex_key
from pit.db import name_thread
from pit.liveness import Liveness
from pit.store import Incoming, Outcome, Store

log = logging.getLogger("pit.ingest")

T = TypeVar("T")

#: Seconds the pit waits for its subscription's SUBACK (see ``Ingest._session``).
SUBACK_WAIT = 120.0

#: Rejects logged one by one per batch; beyond, one line counts them (a flood is not a log flood).
REJECTS_LOGGED = 5
#: The waits between tries while the broker or the database is away: 0.5 s, then doubling to
#: 8 s (with 10 % jitter, so pits restarted together do not knock together), from the first
#: failure after the pit was last subscribed (the table's devices and link use the same).
RETRY = Backoff(initial=0.5, factor=2.0, cap=8.0)
#: A batch not stored this many seconds after it was taken: the pit is behind (``behind``).
BEHIND_S = 2.0


@dataclass
class IngestStats:
    connects: int = 0
    session_present: list[bool] = field(default_factory=list)
    batches: int = 0
    received: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    gaps_reported: int = 0
    gaps_filled: int = 0
    database_errors: int = 0
    link_errors: int = 0
    last_error: str = ""


def subscription(config: PitConfig) -> str:
    topic = f"{config.site.root}+/#"
    group = config.broker.share_group
    return f"$share/{group}/{topic}" if group else topic


class Ingest:
    """Runs until ``stop`` is set; ``on_batch`` hears every committed batch."""

    def __init__(
        self,
        config: PitConfig,
        make_store: Callable[[], Store],
        on_batch: Callable[[Outcome], None] | None = None,
    ) -> None:
        self.config = config
        self.make_store = make_store
        self.on_batch = on_batch
        self.stats = IngestStats()
        #: told of every batch stored (``pit.metrics.PitMetrics``), when the pit serves metrics
        self.metrics: Any = None
        self.connected = asyncio.Event()
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="pit-db", initializer=name_thread("pit-ingest-db")
        )
        self._store: Store | None = None
        #: each table's budget before a message is judged (issue 40, F1)
        self.admission = Admission(config.admission, config.site.root, registered=self._registered)
        #: when the batch being taken or stored began (None: idle), and what still waits
        self._batch_since: float | None = None
        self._waiting: Callable[[], int] = lambda: 0
        key_file = config.commands.key_file
        self.liveness = Liveness(
            config.liveness,
            command_key=read_hex_key(key_file) if key_file is not None else None,
            key_id=config.commands.key_id,
        )

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, *args)

    def _open_store(self) -> Store:
        if self._store is None:
            self._store = self.make_store()
        return self._store

    def _drop_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def _ingest(self, batch: list[Incoming], dropped: dict[str, Dropped]) -> Outcome:
        return self._open_store().ingest(batch, dropped)

    def _registered(self, name: str) -> bool:
        """Whether the keys file registers ``name`` (before the store is open: assumed)."""
        store = self._store
        return store is None or store.feed_keys.for_table(name) is not None

    def behind(self, now: float) -> float:
        """How far the pit is behind what the broker gave it (seconds; 0 when it keeps up): a
        batch taken longer than ``BEHIND_S`` ago and not yet stored, or more waiting than a
        batch. While it is, no table is called silent for it (``pit.liveness``)."""
        since = self._batch_since
        late = now - since if since is not None else 0.0
        if late > BEHIND_S or self._waiting() > self.config.broker.batch:
            return max(late, BEHIND_S)
        return 0.0

    async def run(self, stop: asyncio.Event) -> None:
        stopper = asyncio.ensure_future(stop.wait())
        attempt = 0  # failures since the pit was last subscribed: the waits grow (RETRY)
        try:
            while not stop.is_set():
                try:
                    await self._db(self._open_store)
                except Exception as exc:  # the database is away: wait for it
                    self._database_error(exc)
                    await asyncio.wait({stopper}, timeout=RETRY.delay(attempt))
                    attempt += 1
                    continue
                try:
                    await self._until_stopped(self._session(stop, stopper), stopper)
                except (BrokerError, _DatabaseDown) as exc:
                    if self.connected.is_set():
                        attempt = 0  # it was up: the next try at once, the waits anew
                    self.connected.clear()
                    if isinstance(exc, BrokerError):
                        self.stats.link_errors += 1
                        self.stats.last_error = str(exc)[:200]
                        log.warning("pit_mqtt_lost: %s", exc)
                    await asyncio.wait({stopper}, timeout=RETRY.delay(attempt))
                    attempt += 1
        finally:
            stopper.cancel()
            self.connected.clear()
            await self._db(self._drop_store)
            self._executor.shutdown(wait=True)

    async def _until_stopped(self, work: Any, stopper: asyncio.Future[Any]) -> None:
        """``work`` to its end, or abandoned a second after a stop (a connect that hangs, a
        broker that never answers: a stop must not wait for them)."""
        task = asyncio.ensure_future(work)
        await asyncio.wait({task, stopper}, return_when="FIRST_COMPLETED")
        if not task.done():
            await asyncio.wait({task}, timeout=1.0)  # a session ends itself on a stop
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, BrokerError):
                await task
            return
        task.result()

    def _database_error(self, exc: BaseException) -> None:
        self.stats.database_errors += 1
        self.stats.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
        log.warning("pit_database_error: %s", self.stats.last_error)
        self._drop_store()

    async def _session(self, stop: asyncio.Event, stopper: asyncio.Future[Any]) -> None:
        async with Session(link(self.config, subscriber=True), manual_ack=True) as client:
            self.stats.connects += 1
            self.stats.session_present.append(client.session_present)
            topic = subscription(self.config)
            # The SUBACK of a kept session comes after the messages the broker sends ahead (up
            # to Receive Maximum), each parsed first: a pit restarted behind a backlog on a busy
            # machine took longer than 10 s, gave up, reconnected and got the same messages
            # again, never storing any (issue 31, bench/pit.py --tables 2000).
            await client.subscribe(topic, timeout=SUBACK_WAIT)
            self.connected.set()
            log.info("pit_subscribed topic=%s session=%s", topic, client.session_present)
            watch = asyncio.create_task(self._watch(client), name="pit-liveness")
            try:
                await self._receive(client, stop, stopper)
            finally:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch

    async def _watch(self, client: Session) -> None:
        """The liveness sweep while connected (``pit.liveness``), once a second."""
        since = time.time()
        while self.liveness.enabled:
            await asyncio.sleep(1.0)  # a periodic sweep, not a synchronisation
            try:
                probes, outcome = await self._db(self._sweep, time.time(), since)
            except Exception as exc:  # the ingest notices a database that is down
                log.warning("pit_liveness_failed: %s", type(exc).__name__)
                continue
            for topic, payload in probes:
                await client.publish(topic, payload, qos=0)
            self._report(outcome)

    def _sweep(self, now: float, since: float) -> tuple[list[tuple[str, bytes]], Outcome]:
        return self.liveness.sweep(self._open_store(), now, since, self.behind(now))

    async def _receive(
        self, client: Session, stop: asyncio.Event, stopper: asyncio.Future[Any]
    ) -> None:
        self._waiting = lambda: client.waiting
        limit = self.config.broker.batch
        linger = self.config.broker.batch_wait
        while not stop.is_set():
            if not await client.arrived(stopper):
                return
            self._batch_since = time.time()
            if linger > 0 and client.waiting < limit:
                # A batch's fixed cost (its transaction, its tables' rows read and written
                # once) is most of a message's when batches are a few messages: wait for more
                # (issue 31: at 2,000 tables batches of ~10 became ~150 with the default 0.2 s).
                # A stop cuts it short.
                await asyncio.wait({stopper}, timeout=linger)
            try:
                await self._store_batch(client, client.take(limit))
            finally:
                self._batch_since = None

    async def _store_batch(self, client: Session, batch: list[Message]) -> None:
        now = time.time()
        items: list[Incoming] = []
        for m in batch:
            payload = m.payload if isinstance(m.payload, bytes) else bytes(m.payload)
            # Charged to its table before anything else is done with it (pit.admission): over
            # the budget it costs its bytes, and is acknowledged with the batch.
            topic = topic_text(m)
            if self.admission.admit(topic, len(payload), now):
                items.append(Incoming(topic, payload, m.retain, now))
        dropped = self.admission.take_dropped()
        self.stats.received += len(batch)
        started = time.perf_counter()
        try:
            outcome = await self._db(self._ingest, items, dropped)
        except Exception as exc:
            # Not acknowledged: the broker keeps them in our session and sends them again.
            await self._db(self._database_error, exc)
            raise _DatabaseDown from exc
        client.acknowledge(batch)
        if self.metrics is not None:
            self.metrics.batch(outcome, len(batch), time.perf_counter() - started, time.time())
        s = self.stats
        s.batches += 1
        s.stored += outcome.stored
        s.duplicates += outcome.duplicates
        s.rejected += outcome.rejected
        s.gaps_reported += len(outcome.gaps_reported)
        s.gaps_filled += len(outcome.gaps_filled)
        for table, seq in outcome.gaps_reported:  # a warning once it outlives its grace
            log.debug("pit_gap table=%s seq=%d reported", table, seq)
        if outcome.rejudged:
            log.warning("pit_key_registered: %d message(s) that waited for their key judged "
                        "again, %d stored", outcome.rejudged, outcome.stored)  # fmt: skip
        for table, reason in outcome.rejects[:REJECTS_LOGGED]:
            log.warning("pit_reject table=%s %s", table, reason)
        if len(outcome.rejects) > REJECTS_LOGGED:
            log.warning("pit_rejects n=%d in one batch (the first %d logged)",
                        len(outcome.rejects), REJECTS_LOGGED)  # fmt: skip
        self._report(outcome)

    def _report(self, outcome: Outcome) -> None:
        """Record alarms to the log, and the outcome to whoever listens (the page)."""
        for alarm in outcome.alarms:
            log.error("pit_record_alarm table=%s kind=%s %s", alarm["table_id"], alarm["kind"],
                      alarm["detail"])  # fmt: skip
        if self.on_batch is not None and (outcome.tables or outcome.alarms or outcome.stored
                                          or outcome.rejected):  # fmt: skip
            self.on_batch(outcome)


class _DatabaseDown(Exception):
    """The database refused a batch: nothing is acknowledged, the broker sends it again."""
