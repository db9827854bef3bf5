"""The MQTT publisher: the journal's outbox to the broker, in order, and commands in.

One :class:`MqttService` per table (``host.config.mqtt``). It connects with the table's client
id, a keepalive and a last will (the retained ``status`` saying ``offline``), and reconnects
forever with capped, jittered backoff. On every connect it flags the backlog as replayed
(:meth:`JournalOutbox.mark_replay`), subscribes to ``<prefix>cmd/+``, publishes the retained
``status`` before any other message, then drains the outbox oldest first. A message leaves the
outbox only when the broker's PUBACK came back with a success code (docs/architecture.md "The
journal is the source of truth"); a crash or a dead link at any instant means the message is
sent again, with the same ``msg_id`` and ``seq`` and ``"replayed": true``.

The connection is a :class:`~controller.mqtt.session.Session` (paho-mqtt's public external-loop
API: each PUBACK's reason code, several publishes in flight); the commands it delivers are the
:class:`~controller.mqtt.commands.CommandIntake`'s to serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from typing import Any

import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.config import MqttConfig
from controller.feed_signature import FeedSigner
from controller.journal import OutboxRow
from controller.journal.views import Outbox
from controller.messages import StatusPayload, envelope
from controller.mqtt.commands import CommandIntake
from controller.mqtt.feed_key import table_signer
from controller.mqtt.session import Options, Session, Will, describe
from controller.mqtt.wire import COMMAND_SIZE_LIMIT, NODELAY, tls_context, wire_payload
from controller.ports import Lifecycle, PublisherHost
from controller.table import Effect, StatusChanged
from drivers.base import Backoff

log = structlog.get_logger(__name__)

#: Outbox messages in flight at once (published, PUBACK not yet seen) under MQTT 3.1.1;
#: MQTT 5 sends one at a time (see ``MqttService._drain``).
PUBLISH_WINDOW = 20
#: Commands queued beyond this while the handlers are busy are dropped by the session.
COMMAND_QUEUE = 1000
#: The largest packet an MQTT 5 broker may send us: a command at its size limit, its topic and
#: properties (MQTT 3.1.1 has no such field: the broker's max_packet_size does it, docs/mqtt.md).
MAX_INCOMING_PACKET = COMMAND_SIZE_LIMIT + 4096


class PublishRefused(Exception):
    """The broker acknowledged a publish with a failure reason code (MQTT 5), e.g. 0x87."""


def _raise_if_stopping(host: Lifecycle) -> None:
    """Python 3.11's asyncio.wait_for can swallow the cancellation that stops the daemon when it
    arrives with the awaited reply (aiomqtt's connect and subscribe did; the session's awaits
    do not use it, but whatever awaits with it must not lose a stop); then nothing raises it
    again and the daemon would never exit. A stop must never be lost: the daemon says it is
    stopping, and this raises the cancellation again."""
    if host.stopping.is_set():
        raise asyncio.CancelledError


def status_message(host: PublisherHost, signer: FeedSigner, *, online: bool) -> bytes:
    """The retained ``status`` envelope, signed. Status is a snapshot, not an event: its ``seq``
    is the last message seq the journal assigned (so it never opens a gap) and its ``msg_id`` is
    new."""
    status = host.table.status()
    if not online:
        status = StatusPayload(
            state="offline",
            table_open=status.table_open,
            devices={},
            round_id=None,
            software_version=status.software_version,
            config_digest=status.config_digest,
        )
    journal = host.journal
    data = envelope(
        status,
        # The journal's id source: time-ordered, unique across restarts, same shape as msg_ids.
        msg_id=journal.new_round_id(),
        table_id=host.config.table.id,
        seq=journal.outbox.message_seq(),
        time=host.clock(),
    )
    return signer.sign(data)


class MqttService:
    """Publishes the table's outbox and status to the broker; its :class:`CommandIntake`
    (``intake``) serves the commands each session delivers.

    ``connected`` is set while a session is up; ``progress`` is set after every message the
    broker acknowledged and ``link_changed`` after every connect and every failed or ended
    session (waiters clear them); they and the counters are for tests and the supervisor page.

    Nothing here raises out of ``run``: a broker that is down, refuses us or drops the link is
    retried forever, and the table deals on, its messages waiting in the journal.
    """

    name = "mqtt"

    def __init__(
        self,
        *,
        window: int = PUBLISH_WINDOW,
        ack_timeout: float = 10.0,
        signer: FeedSigner | None = None,
    ) -> None:
        #: The table's feed key (controller/mqtt/feed_key.py): every message leaves signed.
        #: None: read (or made) from the config when the service starts.
        self.signer = signer
        self.window = window
        self.ack_timeout = ack_timeout
        self.intake = CommandIntake(ack_timeout=ack_timeout)
        self.connected = asyncio.Event()
        self.progress = asyncio.Event()
        self.link_changed = asyncio.Event()
        self.failures = 0
        self.last_error: str | None = None
        self.connects = 0
        self.published = 0
        #: messages sent from their commit (the fast path), not read back by the drain
        self.sent_at_commit = 0
        #: told each message's commit → acknowledgement time (controller/metrics.py)
        self.metrics: Any = None
        self._nudge = asyncio.Event()
        self._status_stale = True
        # The fast path (_offer): a committed message sent at once, from the commit, when the
        # drain waits on an empty outbox; the drain then takes its acknowledgement.
        self._live: Session | None = None
        self._idle = False
        self._sent_through = 0
        self._fresh: list[tuple[OutboxRow, asyncio.Future[ReasonCode | None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def commands(self) -> int:
        """Commands handed to the table."""
        return self.intake.commands

    @property
    def refused(self) -> int:
        """Commands refused before the table."""
        return self.intake.refused

    @property
    def _signer(self) -> FeedSigner:
        if self.signer is None:  # run() sets it before any session
            raise RuntimeError("the feed key is not loaded")
        return self.signer

    def _on_effect(self, effect: Effect) -> None:
        # Messages wake the drain through outbox_changed, which the daemon sets after the
        # commit that queued them; the status is not queued: it is published when stale.
        if isinstance(effect, StatusChanged):
            self._status_stale = True
            self._nudge.set()

    # --- running -----------------------------------------------------------------------------

    async def run(self, host: PublisherHost) -> None:
        if self.signer is None:
            try:
                self.signer = await asyncio.to_thread(table_signer, host.config)
            except (OSError, ValueError) as exc:
                # Nothing leaves unsigned: the messages wait in the journal until it is fixed.
                self.last_error = f"the feed key cannot be used: {exc}"
                log.error("mqtt_feed_key_unusable", error=str(exc)[:300])
                await host.stopping.wait()
                return
        host.subscribe(self._on_effect)
        self._loop = asyncio.get_running_loop()
        unlisten = host.journal.outbox.on_commit(self._offer)
        intake = self.intake
        intake.start(host, self.signer)
        reporter = asyncio.get_running_loop().create_task(
            intake.report_over(host), name="mqtt.rate_report"
        )
        try:
            await self._reconnecting(host)
        finally:
            unlisten()
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
            intake.flush_over(host)

    async def _reconnecting(self, host: PublisherHost) -> None:
        config = host.config.mqtt
        backoff = Backoff(initial=config.reconnect.initial, cap=config.reconnect.cap)
        attempt = 0
        while True:
            _raise_if_stopping(host)
            started = self.connects
            try:
                await self._session(host)
                _raise_if_stopping(host)
                error = "the session ended"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failing link or broker must never stop the table
                error = describe(exc)
            finally:
                self.connected.clear()
            self.failures += 1
            self.last_error = error
            self.link_changed.set()
            if self.connects != started:
                attempt = 0
            delay = backoff.delay(attempt)
            attempt += 1
            pending = host.journal.outbox.count()
            event = "mqtt_disconnected" if self.connects != started else "mqtt_connect_failed"
            log.warning(
                event,
                broker=f"{config.host}:{config.port}",
                error=error,
                retry_in=round(delay, 2),
                outbox_pending=pending,
            )
            await asyncio.sleep(delay)  # backoff between attempts, not synchronisation

    def _options(self, host: PublisherHost) -> Options:
        config: MqttConfig = host.config.mqtt
        v5 = config.protocol == "5"
        connect_properties = None
        if v5:
            # The broker must not deliver us a packet bigger than a command may be (MQTT 5
            # Maximum Packet Size): a 30 MB "command" is dropped by the broker, never read here.
            connect_properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            connect_properties.MaximumPacketSize = MAX_INCOMING_PACKET
        will = status_message(host, self._signer, online=False)
        return Options(
            client_id=config.client_id,
            v5=v5,
            keepalive=config.keepalive,
            username=config.username,
            password=config.read_password(),
            tls_context=tls_context(config.tls) if config.tls is not None else None,
            will=Will(host.topic("status"), will, qos=1, retain=True),
            connect_properties=connect_properties,
            max_inflight=self.window,
            incoming_limit=COMMAND_QUEUE,
            socket_options=NODELAY,
            timeout=10.0,
            logger=logging.getLogger("paigow.mqtt.paho"),
        )

    async def _session(self, host: PublisherHost) -> None:
        """One connection: backlog flagged, commands subscribed, status published first, then drain
        and serve until the link fails (raises) or the task is cancelled (publishes offline)."""
        config = host.config.mqtt
        async with Session(config.host, config.port, self._options(host)) as session:
            _raise_if_stopping(host)
            self.connects += 1
            await self._opened(session, host)
            self.connected.set()
            self.link_changed.set()
            try:
                async with asyncio.TaskGroup() as tg:
                    name = f"mqtt[{config.client_id}]"
                    tg.create_task(self._drain(session, host), name=f"{name}.drain")
                    serve = self.intake.serve(session, host, tg)
                    tg.create_task(serve, name=f"{name}.commands")
            except asyncio.CancelledError:
                # A clean stop: say so, as the will would after a crash.
                with contextlib.suppress(Exception):
                    await session.publish_acked(
                        host.topic("status"),
                        status_message(host, self._signer, online=False),
                        retain=True,
                        timeout=2.0,
                    )
                raise

    async def _opened(self, session: Session, host: PublisherHost) -> None:
        """A new connection's first steps: the backlog flagged replayed, the commands
        subscribed, the status published."""
        config = host.config.mqtt
        # Everything still pending now is late, perhaps sent before: flag it replayed. A
        # journal that refuses the write (a full disk: the table is in fault) must not keep
        # the retained status, which says so, from going out.
        try:
            backlog = await asyncio.to_thread(host.journal.outbox.mark_replay)
        except sqlite3.Error as exc:
            backlog = -1
            log.error("mqtt_backlog_not_flagged", error=str(exc))
        # Subscribed before "online" goes out, so whoever sees it may send commands at once.
        granted = await session.subscribe(host.topic("cmd/+"), qos=1)
        _raise_if_stopping(host)
        if any(code.is_failure for code in granted):
            # The feed matters more than commands: publish on, and say so.
            log.error("mqtt_commands_refused", topic=host.topic("cmd/+"), granted=str(granted))
        await self._publish_status(session, host)
        log.info(
            "mqtt_connected",
            broker=f"{config.host}:{config.port}",
            client_id=config.client_id,
            protocol=config.protocol,
            tls=config.tls is not None,
            backlog=backlog,
        )

    async def _publish_status(self, session: Session, host: PublisherHost) -> None:
        self._status_stale = False
        code = await session.publish_acked(
            host.topic("status"),
            status_message(host, self._signer, online=True),
            retain=True,
            timeout=self.ack_timeout,
        )
        if code.is_failure:
            raise PublishRefused(f"status refused by the broker: {code}")

    # --- the outbox ----------------------------------------------------------------------------

    async def _drain(self, session: Session, host: PublisherHost) -> None:
        journal = host.journal.outbox
        # An MQTT 5 PUBACK may refuse a message (0x87 not authorised, 0x97 quota, …) while the
        # broker accepts the ones pipelined behind it: one at a time keeps the order. A 3.1.1
        # broker can only drop the link, after which nothing behind the lost message arrived.
        window = 1 if host.config.mqtt.protocol == "5" else self.window
        self._live = session
        try:
            while True:
                if self._status_stale:
                    # The status is no row of the outbox: a drain that was idle stays so, and a
                    # commit meanwhile still goes out from its commit (_offer).
                    await self._publish_status(session, host)
                self._nudge.clear()
                host.outbox_changed.clear()
                self._idle = False  # from here the drain reads or sends rows itself
                if self._fresh:  # sent from their commit (_offer): their acknowledgements
                    fresh, self._fresh = self._fresh, []
                    await self._settle(journal, fresh)
                    continue
                rows, through = await asyncio.to_thread(journal.pending_through, window)
                if rows:
                    await self._publish_rows(session, journal, rows)
                    continue
                self._sent_through = through
                self._idle = True
                if not self._status_stale:
                    await _either(self._nudge, host.outbox_changed)
        finally:
            self._live = None
            self._idle = False
            if self._fresh:  # sent, never acknowledged on this link: counted, and replayed
                failed = [row.msg_id for row, _ in self._fresh]
                self._fresh = []
                with contextlib.suppress(sqlite3.Error):
                    await asyncio.to_thread(journal.mark_attempts, failed)

    @property
    def idle(self) -> bool:
        """Whether the drain has found the outbox empty and reads nothing now: the next commit's
        first message leaves from the commit itself."""
        return self._live is not None and self._idle

    def _offer(self, rows: list[OutboxRow]) -> None:
        """A transaction has committed ``rows``: if the drain waits on an empty outbox (so these
        are the very next messages), send the first at once, without reading it back from the
        journal or waiting for the drain to wake; the drain takes its acknowledgement. Anything
        else (a backlog, a message in flight, another thread's commit) is left to the drain,
        which the commit's ``outbox_changed`` wakes: this is only a shortcut, in order."""
        session = self._live
        if session is None or not self._idle:
            return
        try:
            if asyncio.get_running_loop() is not self._loop:
                return
        except RuntimeError:  # a commit in a worker thread
            return
        row = rows[0]
        if row.seq != self._sent_through + 1:
            return
        try:
            payload = wire_payload(row, self._signer)
            future = session.send(row.topic, payload, qos=row.qos, retain=row.retain)
        except Exception:  # the link just failed: the drain finds out and the row waits
            return
        self._fresh.append((row, future))
        self.sent_at_commit += 1
        self._sent_through = row.seq
        self._idle = False
        self._nudge.set()

    async def _publish_rows(self, session: Session, journal: Outbox, rows: list[OutboxRow]) -> None:
        """Publish a window of rows in order; delete those whose PUBACK succeeded."""
        signer = self._signer
        in_flight = [
            (
                row,
                session.send(row.topic, wire_payload(row, signer), qos=row.qos, retain=row.retain),
            )
            for row in rows
        ]
        await self._settle(journal, in_flight)

    async def _settle(
        self, journal: Outbox, in_flight: list[tuple[OutboxRow, asyncio.Future[ReasonCode | None]]]
    ) -> None:
        """Wait for the PUBACKs of messages sent in order; delete those that succeeded.

        A send that fails (no PUBACK before the link dropped or the timeout, or a refusal) is
        counted on its row (``attempts``) for the supervisor; a successful one deletes the row,
        so counting it would only cost a journal write per message."""
        session = self._live
        assert session is not None
        acked: list[str] = []
        try:
            for row, future in in_flight:
                code = await session.acked(future, self.ack_timeout)
                if code.is_failure:
                    # Kept in the outbox (and in order): the session restarts after a backoff.
                    log.error(
                        "mqtt_publish_refused", topic=row.topic, seq=row.seq, reason=str(code)
                    )
                    raise PublishRefused(f"{row.topic} seq {row.seq} refused: {code}")
                acked.append(row.msg_id)
                if self.metrics is not None:
                    self.metrics.published_since(row.created_at)
        except Exception:
            failed = [row.msg_id for row, _ in in_flight[len(acked) :]]
            await asyncio.to_thread(journal.mark_attempts, failed)
            raise
        finally:
            # The acknowledged ones are deleted together, also when a later one failed: one
            # disk sync per window instead of one per message.
            if acked:
                await asyncio.to_thread(journal.ack_many, acked)
                self.published += len(acked)
                self.progress.set()


async def _either(*events: asyncio.Event) -> None:
    """Wait until any of ``events`` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
