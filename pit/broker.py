"""The pit's one room with an MQTT library: its subscriber's session and its commands' short
connections, on paho-mqtt's public API alone (issue 41).

paho's documented external-loop interface (``on_socket_open`` / ``on_socket_close`` /
``on_socket_register_write`` / ``on_socket_unregister_write``, ``loop_read``, ``loop_write``,
``loop_misc``) drives the connection from the pit's asyncio loop, through the same driver as the
table's link (``controller.mqtt.session.SocketDriver``, told to read every packet a wake-up
brings); the pit does not go through aiomqtt because what it needs is not on aiomqtt's public
face:

- **manual acknowledgements** (paho's ``manual_ack`` and ``ack``): a message is acknowledged
  only after the transaction that stored it committed (``pit.ingest``);
- **the whole arrived batch at once**: ``on_message`` appends paho's message to a list the
  ingest takes from (:meth:`Session.take`), with no queue, task or wrapper object a message;
  one wake-up of the socket reads every packet that has arrived;
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
from dataclasses import dataclass, replace
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from controller.config.readers import tls_context
from controller.mqtt.session import LinkError, SocketDriver
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


_NODELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)


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
        self.driver: SocketDriver | None = None  # made on the running loop (__aenter__)
        c = self.client
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_subscribe = self._on_subscribe
        c.on_publish = self._on_publish

    # --- connecting ----------------------------------------------------------------------------

    async def __aenter__(self) -> Session:
        loop = self._loop = asyncio.get_running_loop()
        # The table's own driver of paho's socket on the asyncio loop (controller.mqtt.session),
        # told to read every packet a wake-up brings.
        self.driver = SocketDriver(
            self.client, _NODELAY if self.link.nodelay else (), self._broken,
            progress=lambda: self.received,
        )  # fmt: skip
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
                # the socket's callbacks come back to this loop (the driver).
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
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._linked() and self._lost is not None and not self._lost.done():
            self.client.disconnect()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._lost), 1.0)
        self._close()

    def _linked(self) -> bool:
        return self.driver is not None and self.driver.fd >= 0

    def _close(self) -> None:
        if self.driver is not None:
            self.driver.close()
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
        self._lose(BrokerError(f"disconnected: {reason}"))

    def _broken(self, error: LinkError) -> None:
        """paho raised instead of reporting the link lost (the driver tells)."""
        self._lose(BrokerError(str(error)))
        if self.driver is not None:
            self.driver.detach()

    def _lose(self, error: BrokerError) -> None:
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
        if lost is None or not self._linked():
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
