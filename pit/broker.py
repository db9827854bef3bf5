"""The pit's one room with an MQTT library: its subscriber's session and its commands' short
connections, on paho-mqtt's public API alone (issue 41).

paho's documented external-loop interface (``on_socket_open`` / ``on_socket_close`` /
``on_socket_register_write`` / ``on_socket_unregister_write``, ``loop_read``, ``loop_write``,
``loop_misc``) drives the connection from the pit's asyncio loop, as aiomqtt does inside; the
pit does not go through aiomqtt because what it needs is not on aiomqtt's public face:

- **manual acknowledgements** (paho's ``manual_ack`` and ``ack``): a message is acknowledged
  only after the transaction that stored it committed (``pit.ingest``);
- **the whole arrived batch at once**: ``on_message`` appends paho's message to a list the
  ingest takes from (:meth:`Session.take`), with no queue, task or wrapper object a message;
  one wake-up of the socket reads every packet that has arrived (:meth:`Session._readable`);
- **a command's PUBACK reason code** (MQTT 5): a broker's "not authorized" is an error said to
  the supervisor, not a command taken for sent (:func:`publish_once`).

Nothing here reads or replaces a private name of paho. What that costs against the private
shortcuts it replaces (a shared properties table, a read buffer, PUBACKs packed by hand into
paho's queue) is measured in ``bench/mqtt_read.py`` and docs/performance.md; the subscriber's
connection keeps Nagle's algorithm on (no ``TCP_NODELAY``), so the PUBACKs of a batch leave
in a few segments rather than one each.

Tested against a real Mosquitto and RabbitMQ's MQTT plugin (``tests/pit/test_broker.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from controller.config.readers import tls_context
from pit.config import PitConfig, read_secret

#: paho's message as the pit takes it: ``topic`` (str), ``payload`` (bytes), ``qos``,
#: ``retain``, ``mid`` (its packet id, for :meth:`Session.acknowledge`).
Message = paho.MQTTMessage

#: The topic a message whose topic is not UTF-8 is taken under: no table's, so a reject, counted
#: and acknowledged like any (MQTT requires UTF-8 and brokers refuse it; a broker that did not
#: would otherwise have the pit fail on the same message at every connect).
NOT_UTF8 = "\ufffd/not-utf-8"


def topic_text(message: Message) -> str:
    """``message``'s topic, or :data:`NOT_UTF8`."""
    try:
        return message.topic
    except UnicodeDecodeError:
        return NOT_UTF8


#: Packets read in one wake-up of the socket at most, before the loop runs other work.
READ_AT_ONCE = 2000


class BrokerError(Exception):
    """The broker refused, did not answer in time, or the link was lost."""


@dataclass(frozen=True)
class Link:
    """Where and how the pit connects (``[broker]`` of the pit's config)."""

    host: str
    port: int
    client_id: str
    protocol: str = "5"  # "5" or "3.1.1"
    username: str | None = None
    password: str | None = None
    tls: ssl.SSLContext | None = None
    keepalive: int = 60
    #: a persistent session: kept by the broker this long (MQTT 5), or clean_session off (3.1.1)
    persistent: bool = False
    session_expiry: int = 0
    #: unacknowledged messages the broker may send ahead (MQTT 5 Receive Maximum; 0: its own)
    receive_maximum: int = 0
    #: the largest packet the pit takes (MQTT 5 Maximum Packet Size; 0: no limit said)
    max_packet: int = 0
    #: TCP_NODELAY: on for a command's short connection, off for the subscriber (see above)
    nodelay: bool = True
    #: seconds for the connection and its CONNACK
    timeout: float = 10.0


def link(config: PitConfig, *, subscriber: bool) -> Link:
    """The pit's connection from its ``[broker]``: the subscriber's persistent session under
    the pit's own client id, or a command's short connection under an id of its own."""
    b = config.broker
    tls = tls_context(b, passphrase=None) if b.ca_file or b.cert_file else None
    password = read_secret(b.password_file) if b.password_file else None
    common = Link(
        b.host, b.port, b.client_id, protocol=b.protocol, username=b.username,
        password=password, tls=tls, keepalive=b.keepalive,
    )  # fmt: skip
    if not subscriber:
        return replace(common, client_id=f"{b.client_id}-cmd-{uuid.uuid4().hex[:6]}")
    return replace(
        common, persistent=True, session_expiry=b.session_expiry,
        # Unacknowledged messages the broker may send ahead: a few batches, not a backlog in
        # the pit's memory.
        receive_maximum=min(65535, 4 * b.batch),
        # Nothing larger than a message the pit would take reaches it: the broker drops it
        # (MQTT 5 §3.1.2.11.4), before its bytes cross the link (issue 40).
        max_packet=b.max_message_bytes + 4096,
        nodelay=False,  # a batch's PUBACKs in a few segments (above)
    )  # fmt: skip


class Driver:
    """paho's client driven by a running asyncio loop through paho's public external-loop
    interface: its socket watched for reading (:meth:`_readable`) and, while paho has bytes to
    send, for writing; ``loop_misc`` once a second for the keepalive."""

    def __init__(self, client: paho.Client, *, nodelay: bool, progress: Callable[[], int]) -> None:
        self.client = client
        self.nodelay = nodelay
        #: messages handled so far (a read that brought none ends a wake-up's reading)
        self.progress = progress
        self.sock: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._misc: asyncio.Task[None] | None = None
        client.on_socket_open = self._socket_open
        client.on_socket_close = self._socket_close
        client.on_socket_register_write = self._register_write
        client.on_socket_unregister_write = self._unregister_write

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def keepalive(self, name: str) -> None:
        self._misc = asyncio.create_task(self._keepalive(), name=name)

    def stop(self) -> None:
        """The keepalive ended, and the socket closed if it is still open."""
        if self._misc is not None:
            self._misc.cancel()
        if self.sock is not None:  # paho closes it and says so (``_socket_close``)
            with contextlib.suppress(Exception):
                self.client.disconnect()
                self.client.loop_write()

    async def _keepalive(self) -> None:
        while self.sock is not None:
            self.client.loop_misc()
            await asyncio.sleep(1.0)  # paho's own period for its keepalive checks

    # paho's socket callbacks: on the loop's thread, but the socket's opening (connect runs in
    # a thread of the loop's executor), which is handed to the loop.

    def _socket_open(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        if self.nodelay and isinstance(sock, socket.socket) and sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._watch, sock)

    def _watch(self, sock: Any) -> None:
        assert self._loop is not None
        self.sock = sock
        self._loop.add_reader(sock, self._readable)

    def _socket_close(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(sock)
            self._loop.remove_writer(sock)
        self.sock = None

    def _register_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._writable_later, sock)

    def _writable_later(self, sock: Any) -> None:
        if self.sock is sock and self._loop is not None:
            self._loop.add_writer(sock, self._writable)

    def _unregister_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_writer(sock)

    def _readable(self) -> None:
        """Every packet that has arrived, not one a wake-up: paho reads one a call; calls go
        on while each brings a message (or a TLS layer holds bytes the socket will not wake
        for again), and stop at the first that brings none (nothing more has arrived, or a
        packet is half here: the socket wakes again for the rest)."""
        for _ in range(READ_AT_ONCE):
            before = self.progress()
            if self.client.loop_read() != MQTTErrorCode.MQTT_ERR_SUCCESS:
                return  # the link is gone: paho said so through on_disconnect
            if self.progress() != before:
                continue
            pending = getattr(self.sock, "pending", None)  # ssl.SSLSocket.pending
            if pending is None or pending() == 0:
                return

    def _writable(self) -> None:
        self.client.loop_write()


class Session:
    """One connection to the broker, driven by the running asyncio loop::

    async with Session(link) as s:
        await s.subscribe(topic)
        while ...:
            await s.arrived(stopper)
            batch = s.take(100)
            ...
            s.acknowledge(batch)
    """

    def __init__(self, link: Link, *, manual_ack: bool = False) -> None:
        self.link = link
        protocol = paho.MQTTv5 if link.protocol == "5" else paho.MQTTv311
        clean_session = None if link.protocol == "5" else not link.persistent
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2, client_id=link.client_id, protocol=protocol,
            clean_session=clean_session, manual_ack=manual_ack,
        )  # fmt: skip
        if link.username is not None:
            self.client.username_pw_set(link.username, link.password)
        if link.tls is not None:
            self.client.tls_set_context(link.tls)
        self.session_present = False
        self.received = 0
        self._inbox: list[Message] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connected: asyncio.Future[None] | None = None
        self._lost: asyncio.Future[None] | None = None
        self._arrived = asyncio.Event()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.driver = Driver(self.client, nodelay=link.nodelay, progress=lambda: self.received)
        c = self.client
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        c.on_publish = self._on_publish

    # --- connecting ----------------------------------------------------------------------------

    async def __aenter__(self) -> Session:
        loop = self._loop = asyncio.get_running_loop()
        self.driver.start(loop)
        self._connected = loop.create_future()
        self._lost = loop.create_future()
        link = self.link
        properties = None
        if link.protocol == "5":
            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            if link.session_expiry:
                properties.SessionExpiryInterval = link.session_expiry
            if link.receive_maximum:
                properties.ReceiveMaximum = link.receive_maximum
            if link.max_packet:
                properties.MaximumPacketSize = link.max_packet
        clean_start: Any = paho.MQTT_CLEAN_START_FIRST_ONLY  # MQTT 3.1.1: clean_session above
        if link.protocol == "5":
            clean_start = not link.persistent
        try:
            async with asyncio.timeout(link.timeout):
                # paho's connect resolves and connects the socket: blocking, so in a thread;
                # the socket's callbacks come back to this loop (``_socket_open``).
                await loop.run_in_executor(
                    None,
                    lambda: self.client.connect(
                        link.host, link.port, link.keepalive, clean_start=clean_start,
                        properties=properties,
                    ),
                )  # fmt: skip
                await self._connected
        except (OSError, TimeoutError, BrokerError) as exc:
            self._close()
            if isinstance(exc, BrokerError):
                raise
            raise BrokerError(f"cannot connect to {link.host}:{link.port}: {exc}") from exc
        self.driver.keepalive(name=f"mqtt-misc-{link.client_id}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.driver.sock is not None and self._lost is not None and not self._lost.done():
            self.client.disconnect()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._lost), 1.0)
        self._close()

    def _close(self) -> None:
        self.driver.stop()
        for future in (self._connected, self._lost, *self._pending.values()):
            if future is not None and not future.done():
                future.cancel()

    def _on_connect(self, client: paho.Client, userdata: Any, flags: Any, reason: ReasonCode,
                    properties: Any) -> None:  # fmt: skip
        future = self._connected
        if future is None or future.done():
            return
        if reason.is_failure:
            future.set_exception(BrokerError(f"the broker refused the connection: {reason}"))
        else:
            self.session_present = bool(flags.session_present)
            future.set_result(None)

    def _on_disconnect(self, client: paho.Client, userdata: Any, flags: Any, reason: ReasonCode,
                       properties: Any) -> None:  # fmt: skip
        error = BrokerError(f"disconnected: {reason}")
        for future in (self._connected, self._lost, *self._pending.values()):
            if future is not None and not future.done():
                future.set_exception(error)
                future.exception()  # a signal: whoever waits on it reads it, nobody must
        self._pending.clear()
        self._arrived.set()  # a reader waiting for messages hears it

    def _on_message(self, client: paho.Client, userdata: Any, message: Message) -> None:
        self._inbox.append(message)
        self.received += 1
        self._arrived.set()

    def _on_subscribe(self, client: paho.Client, userdata: Any, mid: int,
                      reasons: list[ReasonCode], properties: Any) -> None:  # fmt: skip
        future = self._pending.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(reasons)

    def _on_publish(self, client: paho.Client, userdata: Any, mid: int, reason: ReasonCode,
                    properties: Any) -> None:  # fmt: skip
        future = self._pending.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(reason)

    # --- what the pit does with it -------------------------------------------------------------

    def _check_link(self) -> None:
        lost = self._lost
        if lost is None or self.driver.sock is None:
            raise BrokerError("not connected")
        if lost.done() and not lost.cancelled():
            raise BrokerError("the link is lost") from lost.exception()

    async def _answer(self, rc: MQTTErrorCode, mid: int, what: str, timeout: float) -> Any:
        if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            raise BrokerError(f"{what}: {paho.error_string(rc)}")
        assert self._loop is not None and self._lost is not None
        future = self._pending.setdefault(mid, self._loop.create_future())
        try:
            async with asyncio.timeout(timeout):
                await asyncio.wait({future, self._lost}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            raise BrokerError(f"{what}: no answer within {timeout:g} s") from None
        finally:
            self._pending.pop(mid, None)
        if not future.done():
            self._check_link()
        return future.result()

    async def subscribe(self, topic: str, *, timeout: float, retain_handling: int = 1) -> None:
        """``topic`` at QoS 1; on MQTT 5 retained messages only when the subscription is new
        (``retain_handling`` 1; 0: at every subscribe, 2: never)."""
        self._check_link()
        if self.link.protocol == "5":
            options = SubscribeOptions(qos=1, retainHandling=retain_handling)
            rc, mid = self.client.subscribe(topic, options=options)
        else:
            rc, mid = self.client.subscribe(topic, qos=1)
        reasons = await self._answer(rc, mid or 0, f"subscribe {topic}", timeout)
        failed = [r for r in reasons if r.is_failure]
        if failed:
            raise BrokerError(f"subscribe {topic}: refused ({failed[0]})")

    async def publish(self, topic: str, payload: bytes, *, qos: int = 0,
                      timeout: float = 10.0) -> None:  # fmt: skip
        """``payload`` on ``topic``; at QoS 1, once the broker acknowledged it with success
        (MQTT 5: a PUBACK's failure reason, "not authorized" say, is a BrokerError)."""
        self._check_link()
        info = self.client.publish(topic, payload, qos=qos)
        if qos == 0:
            if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                raise BrokerError(f"publish {topic}: {paho.error_string(info.rc)}")
            return
        reason = await self._answer(info.rc, info.mid, f"publish {topic}", timeout)
        if isinstance(reason, ReasonCode) and reason.is_failure:
            raise BrokerError(f"publish {topic}: the broker refused it ({reason})")

    async def arrived(self, stopper: asyncio.Future[Any]) -> bool:
        """Until a message has arrived (True) or ``stopper`` is done (False); BrokerError when
        the link is lost."""
        while not self._inbox:
            self._check_link()
            self._arrived.clear()
            waiter = asyncio.ensure_future(self._arrived.wait())
            try:
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if stopper.done():
                return False
        return True

    @property
    def waiting(self) -> int:
        """Messages arrived and not yet taken."""
        return len(self._inbox)

    def take(self, most: int) -> list[Message]:
        """Up to ``most`` of the messages that have arrived, in their order."""
        taken, self._inbox = self._inbox[:most], self._inbox[most:]
        return taken

    def acknowledge(self, messages: list[Message]) -> None:
        """Their PUBACKs, in the order they arrived (MQTT requires it), once their batch is
        committed; paho writes them when the socket can take them."""
        for m in messages:
            if m.qos > 0:
                self.client.ack(m.mid, m.qos)


async def publish_once(link: Link, topic: str, payload: bytes, timeout: float = 10.0) -> None:
    """One message at QoS 1 on a short connection of its own (the pit's commands), returned
    once the broker acknowledged it with success."""
    started = time.monotonic()
    async with Session(link) as session:
        left = max(1.0, timeout - (time.monotonic() - started))
        await session.publish(topic, payload, qos=1, timeout=left)
