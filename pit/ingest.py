"""The pit's subscriber: every table of the site, into the database, acknowledged after the commit.

- A persistent session: MQTT 5 with clean start off and a session expiry, or MQTT 3.1.1 with
  ``clean_session`` false, under a client id that stays the same across restarts
  (``[broker] client_id``). While the pit is away the broker keeps its messages.
- QoS 1 and manual acknowledgements (paho's ``manual_ack``; aiomqtt 2.5 has no switch for it, so
  the paho client underneath is told): a message is acknowledged (PUBACK) only after the
  transaction that stored it committed. A crash, a database that went away or a lost link before
  that leaves it unacknowledged, and the broker sends it again on the next connect; the copy is
  then a duplicate by ``msg_id`` and stored no second time.
- Batches: what has arrived (up to ``[broker] batch``) is stored in one transaction, then
  acknowledged in the order it arrived (MQTT requires PUBACKs in order).
- A database error: the batch is not acknowledged, the MQTT connection is dropped (its session
  stays on the broker with the messages in flight), the database is retried every second, and
  the pit connects again once it answers.
- Several pits: ``[broker] share_group`` subscribes through ``$share/<group>/…``; each message
  goes to one member, all of them write the same PostgreSQL database (the per-table row is
  locked for the seq bookkeeping).
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

import aiomqtt

from pit.config import PitConfig, read_secret
from pit.store import Incoming, Outcome, Store

log = logging.getLogger("pit.ingest")

T = TypeVar("T")


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


class _Client(aiomqtt.Client):
    """aiomqtt's client, noting whether the broker kept our session."""

    session_present: bool | None = None

    def _on_connect(self, client: Any, userdata: Any, flags: Any, *args: Any) -> None:
        self.session_present = bool(getattr(flags, "session_present", False))
        super()._on_connect(client, userdata, flags, *args)


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
        self.connected = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pit-db")
        self._store: Store | None = None

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

    def _ingest(self, batch: list[Incoming]) -> Outcome:
        return self._open_store().ingest(batch)

    def _client(self) -> _Client:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        from controller.mqtt.wire import NODELAY

        b = self.config.broker
        password = read_secret(b.password_file) if b.password_file else None
        tls = None
        if b.ca_file or b.cert_file:
            from controller.config import TlsConfig
            from controller.mqtt.wire import tls_context

            tls = tls_context(
                TlsConfig(ca_file=b.ca_file, cert_file=b.cert_file, key_file=b.key_file),
                passphrase=None,
            )
        if b.protocol == "5":
            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            properties.SessionExpiryInterval = b.session_expiry
            # Unacknowledged messages the broker may send ahead: a few batches, not a backlog
            # in the pit's memory.
            properties.ReceiveMaximum = min(65535, 4 * b.batch)
            client = _Client(
                b.host, b.port, identifier=b.client_id, username=b.username, password=password,
                tls_context=tls, protocol=aiomqtt.ProtocolVersion.V5, clean_start=False,
                properties=properties, keepalive=b.keepalive, socket_options=NODELAY, timeout=10,
            )  # fmt: skip
        else:
            client = _Client(
                b.host, b.port, identifier=b.client_id, username=b.username, password=password,
                tls_context=tls, protocol=aiomqtt.ProtocolVersion.V311, clean_session=False,
                keepalive=b.keepalive, socket_options=NODELAY, timeout=10,
            )  # fmt: skip
        client._client.manual_ack_set(True)  # acknowledged after the commit (module text)
        return client

    async def run(self, stop: asyncio.Event) -> None:
        stopper = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                try:
                    await self._db(self._open_store)
                except Exception as exc:  # the database is away: wait for it
                    self._database_error(exc)
                    await asyncio.wait({stopper}, timeout=1.0)
                    continue
                try:
                    await self._session(stop, stopper)
                except aiomqtt.MqttError as exc:
                    self.connected.clear()
                    self.stats.link_errors += 1
                    self.stats.last_error = str(exc)[:200]
                    log.warning("pit_mqtt_lost: %s", exc)
                    await asyncio.wait({stopper}, timeout=0.5)
                except _DatabaseDown:
                    self.connected.clear()
                    await asyncio.wait({stopper}, timeout=1.0)
        finally:
            stopper.cancel()
            self.connected.clear()
            await self._db(self._drop_store)
            self._executor.shutdown(wait=True)

    def _database_error(self, exc: BaseException) -> None:
        self.stats.database_errors += 1
        self.stats.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
        log.warning("pit_database_error: %s", self.stats.last_error)
        self._drop_store()

    async def _session(self, stop: asyncio.Event, stopper: asyncio.Future[Any]) -> None:
        from paho.mqtt.subscribeoptions import SubscribeOptions

        client = self._client()
        async with client:
            self.stats.connects += 1
            self.stats.session_present.append(bool(client.session_present))
            topic = subscription(self.config)
            if self.config.broker.protocol == "5":
                # Retained messages only when the subscription is new (not on every reconnect).
                await client.subscribe(topic, options=SubscribeOptions(qos=1, retainHandling=1))
            else:
                await client.subscribe(topic, qos=1)
            self.connected.set()
            log.info("pit_subscribed topic=%s session=%s", topic, client.session_present)
            messages = client.messages
            limit = self.config.broker.batch
            while not stop.is_set():
                getter = asyncio.ensure_future(anext(messages))
                done, _ = await asyncio.wait({getter, stopper}, return_when="FIRST_COMPLETED")
                if getter not in done:
                    getter.cancel()
                    with contextlib.suppress(BaseException):
                        await getter
                    return
                batch = [getter.result()]
                while len(messages) and len(batch) < limit:
                    batch.append(await anext(messages))
                await self._store_batch(client, batch)

    async def _store_batch(self, client: _Client, batch: list[aiomqtt.Message]) -> None:
        now = time.time()
        items = [
            Incoming(
                m.topic.value,
                m.payload if isinstance(m.payload, bytes) else str(m.payload or "").encode(),
                m.retain,
                now,
            )
            for m in batch
        ]
        self.stats.received += len(items)
        try:
            outcome = await self._db(self._ingest, items)
        except Exception as exc:
            # Not acknowledged: the broker keeps them in our session and sends them again.
            await self._db(self._database_error, exc)
            raise _DatabaseDown from exc
        for m in batch:  # in the order they arrived (MQTT: PUBACKs in order)
            if m.qos > 0:
                client._client.ack(m.mid, m.qos)
        s = self.stats
        s.batches += 1
        s.stored += outcome.stored
        s.duplicates += outcome.duplicates
        s.rejected += outcome.rejected
        s.gaps_reported += len(outcome.gaps_reported)
        s.gaps_filled += len(outcome.gaps_filled)
        for table, seq in outcome.gaps_reported:
            log.warning("pit_gap table=%s seq=%d missing", table, seq)
        for alarm in outcome.alarms:
            log.error("pit_record_alarm table=%s kind=%s %s", alarm["table_id"], alarm["kind"],
                      alarm["detail"])  # fmt: skip
        if self.on_batch is not None:
            self.on_batch(outcome)


class _DatabaseDown(Exception):
    """The database refused a batch: nothing is acknowledged, the broker sends it again."""
