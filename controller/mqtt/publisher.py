"""The MQTT publisher: the journal's outbox to the broker, in order, and commands in.

One :class:`MqttService` per table (``host.config.mqtt``). It connects with the table's client
id, a keepalive and a last will (the retained ``status`` saying ``offline``), and reconnects
forever with capped, jittered backoff. On every connect it flags the backlog as replayed
(:meth:`Journal.mark_replay`), subscribes to ``<prefix>cmd/+``, publishes the retained
``status`` before any other message, then drains the outbox oldest first. A message leaves the
outbox only when the broker's PUBACK came back with a success code (docs/architecture.md "The
journal is
the source of truth"); a crash or a dead link at any instant means the message is sent again,
with the same ``msg_id`` and ``seq`` and ``"replayed": true``.

aiomqtt 2.5 (on paho-mqtt 2.x): ``await client.publish(qos=1)`` returns after the PUBACK but
drops its MQTT 5 reason code and waits out its timeout when the link drops. :class:`_Client`
adds a publish that returns the reason code and gives up as soon as the link is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import aiomqtt
import paho.mqtt.client as paho
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.clock import iso
from controller.config import MqttConfig
from controller.feed_signature import FeedSigner
from controller.journal import OutboxRow
from controller.journal.views import Outbox
from controller.messages import (
    COMMAND_KINDS,
    Authenticate,
    Command,
    Resend,
    StatusPayload,
    envelope,
)
from controller.mqtt.client import Client
from controller.mqtt.feed_key import table_signer
from controller.mqtt.rate import CommandBudgets, CommandRate
from controller.mqtt.signing import CommandVerifier, read_keys
from controller.mqtt.wire import (
    COMMAND_SIZE_LIMIT,
    NODELAY,
    CommandRefused,
    ReplyPayload,
    check_person,
    parse_signed_command,
    reply_bytes,
    tls_context,
    wire_payload,
)
from controller.ports import Lifecycle, Origin, PublisherHost
from controller.table import Effect, Refusal, StatusChanged
from drivers.base import Backoff

log = structlog.get_logger(__name__)

#: Outbox messages in flight at once (published, PUBACK not yet seen) under MQTT 3.1.1;
#: MQTT 5 sends one at a time (see ``MqttService._drain``).
PUBLISH_WINDOW = 20
#: Commands refused over the rate are journaled as one record a minute with their count.
RATE_REPORT = timedelta(minutes=1)
#: Command handlers running at once; more commands wait in the receive queue.
COMMAND_SLOTS = 16
#: Commands queued beyond this while the handlers are busy are dropped by the client.
COMMAND_QUEUE = 1000
#: The largest packet an MQTT 5 broker may send us: a command at its size limit, its topic and
#: properties (MQTT 3.1.1 has no such field: the broker's max_packet_size does it, docs/mqtt.md).
MAX_INCOMING_PACKET = COMMAND_SIZE_LIMIT + 4096


class PublishRefused(Exception):
    """The broker acknowledged a publish with a failure reason code (MQTT 5), e.g. 0x87."""


def _raise_if_stopping(host: Lifecycle) -> None:
    """Python 3.11's asyncio.wait_for (inside aiomqtt's connect and subscribe) can swallow the
    cancellation that stops the daemon when it arrives with the awaited reply; then nothing
    raises it again and the daemon would never exit. A stop must never be lost: the daemon
    says it is stopping, and this raises the cancellation again."""
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
        seq=journal.message_seq(),
        time=host.clock(),
    )
    return signer.sign(data)


def _response_topic(message: aiomqtt.Message) -> tuple[str | None, bytes | None]:
    """The MQTT 5 response topic and correlation data of a request, where present and usable."""
    props = message.properties
    topic: object = getattr(props, "ResponseTopic", None) if props is not None else None
    correlation: object = getattr(props, "CorrelationData", None) if props is not None else None
    if not isinstance(topic, str) or not topic or topic.startswith("$") or set(topic) & {"+", "#"}:
        topic = None
    return topic, correlation if isinstance(correlation, bytes) else None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _describe(exc: BaseException) -> str:
    leaves = [e for e in _leaves(exc) if not isinstance(e, asyncio.CancelledError)]
    first = leaves[0] if leaves else exc
    return f"{type(first).__name__}: {first}"[:300]


# --- the client --------------------------------------------------------------------------------


class _Client(Client):
    """aiomqtt's client with a publish that reports the PUBACK's reason code.

    ``send`` hands a message to paho and returns a future of its PUBACK reason code; ``acked`` waits
    for it, or raises MqttError as soon as the connection is lost. Several sends may be in flight;
    paho writes them in call order and the broker acknowledges them in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._acks: dict[int, asyncio.Future[ReasonCode]] = {}

    def _on_publish(
        self,
        client: paho.Client,
        userdata: Any,
        mid: int,
        reason_code: ReasonCode,
        properties: Properties,
    ) -> None:
        future = self._acks.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(reason_code)
        super()._on_publish(client, userdata, mid, reason_code, properties)

    def send(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        properties: Properties | None = None,
    ) -> asyncio.Future[ReasonCode]:
        info = self._client.publish(topic, payload, qos, retain, properties)
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise aiomqtt.MqttCodeError(info.rc, "Could not publish message")
        future: asyncio.Future[ReasonCode] = asyncio.get_running_loop().create_future()
        if qos == 0 or info.is_published():
            future.set_result(ReasonCode(PacketTypes.PUBACK, "Success"))
        else:
            self._acks[info.mid] = future
        return future

    async def acked(self, future: asyncio.Future[ReasonCode], timeout: float) -> ReasonCode:
        lost = self._disconnected
        waiting: set[asyncio.Future[Any]] = {future, lost}
        done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if future in done:
            return future.result()
        if lost in done:
            cause = lost.exception()  # retrieved here, so asyncio does not warn about it
            raise aiomqtt.MqttError("connection lost while waiting for a PUBACK") from cause
        raise aiomqtt.MqttError(f"no PUBACK within {timeout:g} s")

    async def publish_acked(
        self,
        topic: str,
        payload: bytes,
        *,
        retain: bool = False,
        properties: Properties | None = None,
        timeout: float = 10.0,
    ) -> ReasonCode:
        return await self.acked(
            self.send(topic, payload, qos=1, retain=retain, properties=properties), timeout
        )


# --- the service -------------------------------------------------------------------------------


class MqttService:
    """Publishes the table's outbox and status to the broker and serves commands.

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
        self.connected = asyncio.Event()
        self.progress = asyncio.Event()
        self.link_changed = asyncio.Event()
        self.failures = 0
        self.last_error: str | None = None
        self.connects = 0
        self.published = 0
        self.commands = 0
        self.refused = 0
        self._nudge = asyncio.Event()
        self._status_stale = True
        self.verifier: CommandVerifier | None = None
        #: The badges of the table's supervisors_file; None: no such file (names as typed).
        self.supervisors: frozenset[str] | None = None
        #: the signed commands' budget and the unsigned and refused ones' (issue 40)
        self.budgets = CommandBudgets(CommandRate(120), CommandRate(30))
        self.resends = CommandRate(RESEND_PER_MINUTE)  # seqs asked for again

    @property
    def _signer(self) -> FeedSigner:
        if self.signer is None:  # run() sets it before any session
            raise RuntimeError("the feed key is not loaded")
        return self.signer

    # --- effects -----------------------------------------------------------------------------

    def _on_effect(self, effect: Effect) -> None:
        # Messages wake the drain through outbox_changed, which the daemon sets after the
        # commit that queued them; the status is not queued: it is published when stale.
        if isinstance(effect, StatusChanged):
            self._status_stale = True
            self._nudge.set()

    # --- running -----------------------------------------------------------------------------

    def _verifier(self, host: PublisherHost) -> CommandVerifier | None:
        """Signed commands when keys are configured (docs/mqtt.md); a keys file that cannot be
        read accepts no command but the read-only ones, and says so."""
        config = host.config.mqtt
        if config.command_keys_file is None:
            log.warning(
                "mqtt_commands_unsigned",
                detail="no command_keys_file: anyone who may publish on the command topics may "
                "command this table (docs/mqtt.md, signed commands)",
            )
            return None
        try:
            keys = read_keys(config.command_keys_file)
        except (OSError, ValueError) as exc:
            log.error("mqtt_command_keys_unreadable", error=str(exc))
            keys = {}
        verifier = CommandVerifier(
            keys,
            config.command_window,
            config.unsigned_read_only,
            clock=host.clock,
            table_id=host.config.table.id,
        )
        since = iso(host.clock() - timedelta(seconds=2 * config.command_window))
        verifier.remember(
            (rid, datetime.fromisoformat(at)) for rid, at in host.journal.recent_command_ids(since)
        )
        return verifier

    def _report_refusal(
        self, host: PublisherHost, topic: str, name: str, exc: CommandRefused
    ) -> None:
        """Journal the refusal (the table alarms when one sender keeps failing). Over the rate,
        one record a minute says how many were refused: a flood must not become a journal
        flood."""
        command = name[:64] if name in COMMAND_KINDS else "unknown"
        if exc.reason in ("rate_limited", "flood"):
            if self.budgets.due(host.clock(), exc.reason, RATE_REPORT):
                self._flush_over(host, command, exc.reason)
            return
        host.refused(Refusal("mqtt", topic[:200], command, exc.reason, exc.error[:300]))

    def _flush_over(self, host: PublisherHost, command: str = "any", only: str = "") -> None:
        """A record for each budget run over (``only``: that one), with how many it refused."""
        for reason, detail, over in self.budgets.take(host.clock(), only):
            host.refused(Refusal("mqtt", host.topic("cmd/+"), command, reason, detail, over))

    async def _report_over(self, host: PublisherHost) -> None:
        """The refusals over the rate since the last record, once a minute while they last."""
        while True:
            await asyncio.sleep(RATE_REPORT.total_seconds())
            self._flush_over(host)

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
        self.verifier = self._verifier(host)
        self.supervisors = _supervisors(host)
        limits = host.config.limits
        self.budgets = CommandBudgets(
            CommandRate(limits.mqtt_commands_per_minute),
            CommandRate(limits.mqtt_unsigned_per_minute),
            keyed=self.verifier is not None,
        )
        reporter = asyncio.get_running_loop().create_task(
            self._report_over(host), name="mqtt.rate_report"
        )
        try:
            await self._reconnecting(host)
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
            self._flush_over(host)

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
                error = _describe(exc)
            finally:
                self.connected.clear()
            self.failures += 1
            self.last_error = error
            self.link_changed.set()
            if self.connects != started:
                attempt = 0
            delay = backoff.delay(attempt)
            attempt += 1
            pending = host.journal.outbox_pending()
            event = "mqtt_disconnected" if self.connects != started else "mqtt_connect_failed"
            log.warning(
                event,
                broker=f"{config.host}:{config.port}",
                error=error,
                retry_in=round(delay, 2),
                outbox_pending=pending,
            )
            await asyncio.sleep(delay)  # backoff between attempts, not synchronisation

    def _client(self, host: PublisherHost) -> _Client:
        config: MqttConfig = host.config.mqtt
        v5 = config.protocol == "5"
        will = aiomqtt.Will(
            topic=host.topic("status"),
            payload=status_message(host, self._signer, online=False),
            qos=1,
            retain=True,
        )
        connect_properties = None
        if v5:
            # The broker must not deliver us a packet bigger than a command may be (MQTT 5
            # Maximum Packet Size): a 30 MB "command" is dropped by the broker, never read here.
            connect_properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            connect_properties.MaximumPacketSize = MAX_INCOMING_PACKET
        return _Client(
            config.host,
            config.port,
            properties=connect_properties,
            username=config.username,
            password=config.read_password(),
            identifier=config.client_id,
            protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311,
            will=will,
            # Commands sent while we were away are stale: no persistent session.
            clean_session=None if v5 else True,
            clean_start=True if v5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
            keepalive=config.keepalive,
            timeout=10.0,
            tls_context=tls_context(config.tls) if config.tls is not None else None,
            max_inflight_messages=self.window,
            socket_options=NODELAY,
            max_queued_incoming_messages=COMMAND_QUEUE,
            logger=logging.getLogger("paigow.mqtt.paho"),
        )

    async def _session(self, host: PublisherHost) -> None:
        """One connection: backlog flagged, commands subscribed, status published first, then drain
        and serve until the link fails (raises) or the task is cancelled (publishes offline)."""
        config = host.config.mqtt
        client = self._client(host)
        async with client:
            _raise_if_stopping(host)
            self.connects += 1
            # Everything still pending now is late, perhaps sent before: flag it replayed. A
            # journal that refuses the write (a full disk: the table is in fault) must not keep
            # the retained status, which says so, from going out.
            try:
                backlog = await asyncio.to_thread(host.journal.mark_replay)
            except sqlite3.Error as exc:
                backlog = -1
                log.error("mqtt_backlog_not_flagged", error=str(exc))
            # Subscribed before "online" goes out, so whoever sees it may send commands at once.
            granted = await client.subscribe(host.topic("cmd/+"), qos=1)
            _raise_if_stopping(host)
            if any(_refused(code) for code in granted):
                # The feed matters more than commands: publish on, and say so.
                log.error("mqtt_commands_refused", topic=host.topic("cmd/+"), granted=str(granted))
            await self._publish_status(client, host)
            log.info(
                "mqtt_connected",
                broker=f"{config.host}:{config.port}",
                client_id=config.client_id,
                protocol=config.protocol,
                tls=config.tls is not None,
                backlog=backlog,
            )
            self.connected.set()
            self.link_changed.set()
            try:
                async with asyncio.TaskGroup() as tg:
                    name = f"mqtt[{config.client_id}]"
                    tg.create_task(self._drain(client, host), name=f"{name}.drain")
                    tg.create_task(self._serve(client, host, tg), name=f"{name}.commands")
            except asyncio.CancelledError:
                # A clean stop: say so, as the will would after a crash.
                with contextlib.suppress(Exception):
                    await client.publish_acked(
                        host.topic("status"),
                        status_message(host, self._signer, online=False),
                        retain=True,
                        timeout=2.0,
                    )
                raise

    async def _publish_status(self, client: _Client, host: PublisherHost) -> None:
        self._status_stale = False
        code = await client.publish_acked(
            host.topic("status"),
            status_message(host, self._signer, online=True),
            retain=True,
            timeout=self.ack_timeout,
        )
        if code.is_failure:
            raise PublishRefused(f"status refused by the broker: {code}")

    # --- the outbox ----------------------------------------------------------------------------

    async def _drain(self, client: _Client, host: PublisherHost) -> None:
        journal = host.journal
        # An MQTT 5 PUBACK may refuse a message (0x87 not authorised, 0x97 quota, …) while the
        # broker accepts the ones pipelined behind it: one at a time keeps the order. A 3.1.1
        # broker can only drop the link, after which nothing behind the lost message arrived.
        window = 1 if host.config.mqtt.protocol == "5" else self.window
        while True:
            if self._status_stale:
                await self._publish_status(client, host)
            self._nudge.clear()
            host.outbox_changed.clear()
            rows = await asyncio.to_thread(journal.pending, window)
            if rows:
                await self._publish_rows(client, journal, rows)
            elif not self._status_stale:
                await _either(self._nudge, host.outbox_changed)

    async def _publish_rows(self, client: _Client, journal: Outbox, rows: list[OutboxRow]) -> None:
        """Publish a window of rows in order; delete those whose PUBACK succeeded.

        A send that fails (no PUBACK before the link dropped or the timeout, or a refusal) is
        counted on its row (``attempts``) for the supervisor; a successful one deletes the row,
        so counting it would only cost a journal write per message."""
        signer = self._signer
        in_flight = [
            (row, client.send(row.topic, wire_payload(row, signer), qos=row.qos, retain=row.retain))
            for row in rows
        ]
        acked: list[str] = []
        try:
            for row, future in in_flight:
                code = await client.acked(future, self.ack_timeout)
                if code.is_failure:
                    # Kept in the outbox (and in order): the session restarts after a backoff.
                    log.error(
                        "mqtt_publish_refused", topic=row.topic, seq=row.seq, reason=str(code)
                    )
                    raise PublishRefused(f"{row.topic} seq {row.seq} refused: {code}")
                acked.append(row.msg_id)
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

    # --- commands ------------------------------------------------------------------------------

    async def _serve(self, client: _Client, host: PublisherHost, tg: asyncio.TaskGroup) -> None:
        slots = asyncio.Semaphore(COMMAND_SLOTS)
        async for message in client.messages:
            await slots.acquire()
            task = tg.create_task(self._command(client, host, message))
            task.add_done_callback(lambda _task: slots.release())

    async def _command(
        self, client: _Client, host: PublisherHost, message: aiomqtt.Message
    ) -> None:
        """Answer one command. It runs in the session's TaskGroup, where an exception would end
        the session (and every command in flight): nothing but a cancellation leaves here. A
        command that cannot be parsed for a reason nobody foresaw is refused as ``malformed``
        (journaled, replied to); a failure after that is logged."""
        topic = message.topic.value
        try:
            await self._answer(client, host, message)
        except Exception as exc:
            log.error("command_failed", topic=topic[:200], error=_describe(exc), exc_info=exc)

    def _parse(self, host: PublisherHost, topic: str, payload: bytes) -> tuple[Command, str | None]:
        """The command and the key that signed it, or CommandRefused: over its budget
        (``CommandBudgets``: on a table with command keys, charged only once the signature is
        checked, so no flood of unsigned or forged commands starves the casino's), refused by
        parse_signed_command, naming a person who is no supervisor of this table
        (``check_person``), or ``malformed`` when the parsing itself failed (a defect to fix:
        logged as an error)."""
        now, keyed = host.clock(), self.verifier is not None
        if not keyed:
            _charged(self.budgets, now, signed=True)
        try:
            command, key_id = parse_signed_command(
                host.prefix,
                topic,
                payload,
                self.verifier,
                table_id=host.config.table.id,
            )
            check_person(command, self.supervisors)
        except CommandRefused:
            if keyed:
                _charged(self.budgets, now, signed=False)
            raise
        except Exception as exc:
            log.error(
                "command_parse_failed",
                topic=topic[:200],
                size=len(payload),
                error=_describe(exc),
                exc_info=exc,
            )
            if keyed:
                _charged(self.budgets, now, signed=False)
            raise CommandRefused(
                f"malformed command: {type(exc).__name__}", reason="malformed"
            ) from None
        if keyed:
            _charged(self.budgets, now, signed=key_id is not None, request_id=command.request_id)
        return command, key_id

    async def _answer(self, client: _Client, host: PublisherHost, message: aiomqtt.Message) -> None:
        topic = message.topic.value
        prefix = host.prefix
        raw = message.payload
        payload = raw if isinstance(raw, bytes) else str(raw if raw is not None else "").encode()
        if not topic.startswith(f"{prefix}cmd/"):
            log.warning("command_ignored", topic=topic[:200], error="not this table's topic")
            return
        name = topic.removeprefix(f"{prefix}cmd/")
        reply_topic, correlation = _reply_route(host, message, name)
        try:
            command, key_id = self._parse(host, topic, payload)
        except CommandRefused as exc:
            reply = self._refuse(host, topic, name, len(payload), exc)
            if exc.reason == "flood":
                # Past the unsigned budget nothing is published in answer, not even a refusal:
                # a flood of small commands must not make the table a broker's amplifier (the
                # journal counts them, one record a minute; issue 40).
                return
        else:
            # Journaled with the command (and an acknowledgement's identity): which key sent it.
            identity = topic if key_id is None else f"{topic} key={key_id}"
            if isinstance(command, Resend):  # the outbox's, not the table's: nothing to decide
                reply = await _resend(host, identity, command, self.resends)
            else:
                reply = await self._run(host, identity, command)
        properties = None
        if correlation is not None:
            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            properties.CorrelationData = correlation
        code = await client.publish_acked(
            reply_topic,
            reply_bytes(reply, self._signer),
            properties=properties,
            timeout=self.ack_timeout,
        )
        if code.is_failure:
            log.warning("command_reply_refused", topic=reply_topic[:200], reason=str(code))

    def _refuse(
        self, host: PublisherHost, topic: str, name: str, size: int, exc: CommandRefused
    ) -> ReplyPayload:
        """A command refused before the table: counted, logged, journaled, answered (a flood's
        refusals: counted, and one record a minute says how many, in the log as in the
        journal)."""
        self.refused += 1
        if exc.reason != "flood":
            log.warning("command_refused", topic=topic[:200], size=size, error=exc.error)
        try:
            self._report_refusal(host, topic, name, exc)
        except Exception as failure:  # the reply still goes out
            log.error("command_refusal_not_journaled", topic=topic[:200], error=str(failure))
        return ReplyPayload(ok=False, error=exc.error, request_id=exc.request_id, data=None)

    async def _run(self, host: PublisherHost, identity: str, command: Command) -> ReplyPayload:
        """A command handed to the table (from ``identity``: its topic, and the key that signed
        it); its reply (a timeout or a defect is answered too)."""
        self.commands += 1
        try:
            answer = await host.submit(command, origin=Origin("mqtt", identity))
            data = answer.data
            if answer.ok and isinstance(command, Authenticate) and data is not None:
                data = {**data, **await asyncio.to_thread(_authenticate, command.nonce)}
            reply = ReplyPayload(
                ok=answer.ok, error=answer.error, request_id=answer.request_id, data=data
            )
        except TimeoutError:
            reply = ReplyPayload(
                ok=False,
                error="the table did not answer in time",
                request_id=command.request_id,
                data=None,
            )
        except Exception as exc:  # still answered; the log has the defect
            log.error(
                "command_failed",
                kind=command.kind,
                request_id=command.request_id,
                error=_describe(exc),
                exc_info=exc,
            )
            reply = ReplyPayload(
                ok=False,
                error="the table could not run the command (an internal error, logged)",
                request_id=command.request_id,
                data=None,
            )
        log.info(
            "command",
            kind=command.kind,
            request_id=command.request_id,
            ok=reply.ok,
            error=reply.error,
        )
        return reply


def _charged(
    budgets: CommandBudgets, now: datetime, *, signed: bool, request_id: str | None = None
) -> None:
    """CommandRefused when the command's budget is spent: ``rate_limited`` (signed, or any on a
    table without keys) or ``flood`` (unsigned or refused: counted, one warning a minute)."""
    reason = budgets.refusal(now, signed=signed)
    if reason == "rate_limited":
        raise CommandRefused(
            f"refused: more than {budgets.signed.per_minute} "
            f"{'signed commands' if budgets.keyed else 'commands'} a minute; try again shortly",
            request_id,
            reason="rate_limited",
        )
    if reason == "flood":
        raise CommandRefused(
            f"refused: more than {budgets.unsigned.per_minute} unsigned or refused commands a "
            "minute; try again shortly",
            reason="flood",
        )


#: Seqs a table sends again a minute, all ``resend`` commands together: a flood of them (each
#: may name 1,000) cannot make the table a broker's amplifier, nor hold its live messages back.
RESEND_PER_MINUTE = 5_000


async def _resend(
    host: PublisherHost, identity: str, command: Resend, budget: CommandRate
) -> ReplyPayload:
    """A ``resend``: the kept copies of the seqs it names back into the outbox (the drain
    publishes them, replayed, lowest seq first), as many as ``budget`` allows now (the rest
    of the range is asked for again later). Logged, not journaled: it changes nothing the
    table decided, and a copy it sends again is the journaled message."""
    first, last = command.from_seq, command.to_seq
    granted = budget.grant(host.clock(), last - first + 1)
    if not granted:
        log.warning("resend_refused", by=identity[:200], from_seq=first, to_seq=last)
        return ReplyPayload(
            ok=False,
            error=f"refused: more than {budget.per_minute} seqs a minute asked for again; "
            "try again shortly",
            request_id=command.request_id,
            data=None,
        )
    last = first + granted - 1
    queued, oldest = await asyncio.to_thread(host.journal.requeue, first, last)
    if queued:
        host.outbox_changed.set()
    log.info("resend", by=identity[:200], from_seq=first, to_seq=last, queued=queued)
    data = {"from_seq": first, "to_seq": last, "queued": queued, "oldest_kept": oldest}
    return ReplyPayload(ok=True, error=None, request_id=command.request_id, data=data)


def _reply_route(
    host: PublisherHost, message: aiomqtt.Message, name: str
) -> tuple[str, bytes | None]:
    """Where the reply goes and its correlation data: the MQTT 5 response topic when it is
    under an allowed prefix (a caller must not make the table publish elsewhere, on its own
    round topic, say), else ``<prefix>reply/<command>``."""
    response_topic, correlation = _response_topic(message)
    allowed = (host.topic("reply/"), *host.config.mqtt.reply_prefixes)
    if response_topic is not None and not response_topic.startswith(allowed):
        log.warning("response_topic_refused", topic=response_topic[:200], command=name)
        response_topic = None
    return response_topic or host.topic(f"reply/{name}"), correlation


def _supervisors(host: PublisherHost) -> frozenset[str] | None:
    """The badges a command may name as its supervisor (``[display] supervisors_file``); a file
    that cannot be read admits nobody, and says so. None without the file."""
    path = host.config.display.supervisors_file
    if path is None:
        return None
    from controller.display.dealers import read_supervisors

    try:
        return frozenset(read_supervisors(path))
    except (OSError, ValueError) as exc:
        log.error("mqtt_supervisors_unreadable", error=str(exc)[:300])
        return frozenset()


def _authenticate(nonce: str) -> dict[str, Any]:
    """The software authentication's answer (controller/software.py), or why there is none."""
    from controller.software import authenticate

    try:
        return dict(authenticate(nonce))
    except Exception as exc:  # no package metadata (a source tree): say so, do not crash
        return {"hmac_sha256": None, "error": f"cannot authenticate: {exc}"}


def _refused(code: int | ReasonCode) -> bool:
    """A SUBACK entry that refuses: 0x80 (MQTT 3.1.1) or any MQTT 5 failure code."""
    return code.is_failure if isinstance(code, ReasonCode) else code >= 0x80


async def _either(*events: asyncio.Event) -> None:
    """Wait until any of ``events`` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
