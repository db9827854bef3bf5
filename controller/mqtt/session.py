"""One MQTT connection on asyncio, through paho-mqtt's public "external event loop" API.

aiomqtt's public API cannot say what the broker answered to a publish (its ``publish`` drops the
MQTT 5 PUBACK reason code: a broker's 0x87 "Not authorized" would look like a delivery) and
keeps no more than one publish of a caller in flight. The table needs both, so its link to the
broker is this small session over paho's documented names only (paho-mqtt 2.x, callback API
version 2): ``on_socket_open`` / ``on_socket_close`` / ``on_socket_register_write`` /
``on_socket_unregister_write`` hand the socket to the event loop, which calls ``loop_read()``
and ``loop_write()`` when it is readable or writable and ``loop_misc()`` every second (the
keepalive); ``on_connect``, ``on_publish`` (with the PUBACK's reason code), ``on_subscribe``,
``on_message`` and ``on_disconnect`` resolve what the caller awaits. paho's ``connect()`` blocks
(name lookup, TCP, the TLS handshake), so it runs in a thread, as aiomqtt runs it.

A session is one connection: entered, it is connected (or raised :class:`LinkError`); once the
link is lost everything awaited on it raises :class:`LinkError` and a new session is needed.
Nothing here is awaited with an exception left in a future nobody reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import paho.mqtt.client as paho
import structlog
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

log = structlog.get_logger(__name__)
T = TypeVar("T")

#: How often paho's keepalive (PINGREQ, and a broker that stopped answering) is looked after.
MISC_INTERVAL = 1.0
#: Packets one wake-up reads at most with ``progress`` (the pit), before the loop runs the rest.
READ_AT_ONCE = 2000


class LinkError(Exception):
    """The connection could not be made, was lost, or did not answer in time."""


class ConnectRefused(LinkError):
    """The broker's CONNACK refused the connection (its reason code says why)."""

    def __init__(self, code: ReasonCode) -> None:
        super().__init__(f"connection refused: {code}")
        self.code = code


@dataclass(frozen=True)
class Will:
    """The last will the broker publishes if the link dies without a DISCONNECT."""

    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = False


@dataclass(frozen=True)
class Incoming:
    """A message the broker delivered (on a subscription of this session)."""

    topic: str
    payload: bytes
    qos: int
    retain: bool
    properties: Properties | None


@dataclass(frozen=True)
class Options:
    """How a session connects: the client id and protocol, credentials, TLS, the will."""

    client_id: str
    v5: bool = False
    keepalive: int = 60
    username: str | None = None
    password: str | None = None
    tls_context: ssl.SSLContext | None = None
    will: Will | None = None
    #: MQTT 5 CONNECT properties (e.g. Maximum Packet Size)
    connect_properties: Properties | None = None
    #: QoS > 0 publishes paho sends before their PUBACKs; more wait in paho's queue, in order
    max_inflight: int = 20
    #: Delivered messages kept until read; more are dropped (and logged)
    incoming_limit: int = 1000
    #: setsockopt arguments for the connected socket (e.g. TCP_NODELAY)
    socket_options: Iterable[tuple[int, int, int]] = ()
    #: seconds to wait for a CONNACK, a SUBACK, or the DISCONNECT to leave
    timeout: float = 10.0
    logger: logging.Logger | None = None


class SocketDriver:
    """A paho client's socket on the asyncio event loop, through paho's public callbacks: read
    when it is readable (``loop_read``), written when paho has something to write
    (``loop_write``), the keepalive every second (``loop_misc``). ``broken`` is told when paho
    raises instead of reporting a broken link through ``on_disconnect``."""

    def __init__(
        self,
        client: paho.Client,
        socket_options: Iterable[tuple[int, int, int]],
        broken: Callable[[LinkError], None],
        progress: Callable[[], int] | None = None,
    ) -> None:
        self.client, self.socket_options, self.broken = client, tuple(socket_options), broken
        #: messages handled so far, for a reader that takes every packet a wake-up brings (the
        #: pit: ``pit.broker``); None reads one packet a wake-up (paho's own way)
        self.progress = progress
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.fd = -1
        self.sock: Any = None  # paho's SocketLike, as on_socket_open gave it
        self.closed = False
        self.misc: asyncio.Task[None] | None = None
        client.on_socket_open = self._on_socket_open
        client.on_socket_close = lambda _client, _data, _sock: self.soon(self.detach)
        client.on_socket_register_write = lambda _c, _d, _s: self.soon(self._want_write)
        client.on_socket_unregister_write = lambda _c, _d, _s: self.soon(self._written)

    def soon(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function`` on the event loop: now when called there, else as soon as it can
        (paho calls the socket callbacks from the thread that connects)."""
        if threading.get_ident() == self.thread:
            function(*args)
        else:
            self.loop.call_soon_threadsafe(function, *args)

    def _on_socket_open(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        self.soon(self._attach, sock)

    def _attach(self, sock: Any) -> None:
        if self.closed:
            sock.close()  # given up on while paho was connecting
            return
        for option in self.socket_options:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(*option)
        self.sock, self.fd = sock, sock.fileno()
        self.loop.add_reader(self.fd, self._readable)
        self.misc = self.loop.create_task(self._keepalive(), name="mqtt.session.keepalive")

    def _want_write(self) -> None:
        if self.fd >= 0:
            self.loop.add_writer(self.fd, self.write)

    def _written(self) -> None:
        if self.fd >= 0:
            self.loop.remove_writer(self.fd)

    def _readable(self) -> None:
        client = self.client
        try:
            if self.progress is not None:
                self._read_all(self.progress)
                return
            client.loop_read()
            # An SSL socket may hold decrypted bytes the selector cannot see.
            sock = client.socket()
            while isinstance(sock, ssl.SSLSocket) and sock.pending() > 0:
                client.loop_read()
                sock = client.socket()
        except Exception as exc:  # a broken link: paho raised instead of reporting it
            self.broken(LinkError(f"connection lost: {type(exc).__name__}: {exc}"))

    def _read_all(self, progress: Callable[[], int]) -> None:
        """Every packet that has arrived, not one a wake-up: paho reads one a call; calls go
        on while each brings a message (or the TLS layer holds bytes the selector cannot see),
        and stop at the first that brings none (nothing more has arrived, or a packet is half
        here: the socket wakes again for the rest)."""
        client = self.client
        for _ in range(READ_AT_ONCE):
            before = progress()
            if client.loop_read() != paho.MQTT_ERR_SUCCESS:
                return  # the link is gone: paho said so through on_disconnect
            if progress() != before:
                continue
            sock = client.socket()
            if not (isinstance(sock, ssl.SSLSocket) and sock.pending() > 0):
                return

    def write(self) -> None:
        """What paho has queued, written now (non-blocking: what the socket cannot take waits
        for the writer paho registers)."""
        try:
            self.client.loop_write()
        except Exception as exc:
            self.broken(LinkError(f"connection lost: {type(exc).__name__}: {exc}"))

    def flush(self) -> None:
        """Write at once what paho has queued, instead of a loop turn later."""
        if self.fd >= 0 and self.client.want_write():
            self.write()

    async def _keepalive(self) -> None:
        try:
            while self.client.loop_misc() == paho.MQTT_ERR_SUCCESS:
                await asyncio.sleep(MISC_INTERVAL)
        except Exception as exc:
            self.broken(LinkError(f"connection lost: {type(exc).__name__}: {exc}"))

    def detach(self) -> None:
        """The socket off the event loop (paho closes it, or :meth:`close` does)."""
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            self.loop.remove_writer(self.fd)
        self.fd = -1
        if self.misc is not None:
            self.misc.cancel()

    def close(self) -> None:
        """Nothing left open, whatever state paho is in (a socket still being connected is
        closed when paho hands it over). paho calls nothing of this driver afterwards: not
        even when it is collected, perhaps in another thread, with the loop gone."""
        self.closed = True
        client = self.client
        # No-ops rather than None: without a register_write callback paho would write from
        # the thread still connecting.
        client.on_socket_close = _ignore
        client.on_socket_register_write = _ignore
        client.on_socket_unregister_write = _ignore
        self.detach()
        if self.sock is not None:
            self.sock.close()


class Session:
    """One connection to the broker: ``async with Session(host, port, options) as session``.

    ``send`` hands a message to paho and returns a future of its PUBACK's reason code (None if
    the link was lost first); ``acked`` awaits it (LinkError on a lost link or a timeout).
    Several sends may be in flight: paho writes them in call order on the one connection and
    the broker acknowledges them in order. ``messages()`` yields what the subscriptions
    deliver until the link is lost (then LinkError)."""

    def __init__(self, host: str, port: int, options: Options) -> None:
        self.host, self.port, self.options = host, port, options
        #: why the link ended (None while it is up)
        self.error: LinkError | None = None
        self._driver: SocketDriver | None = None
        self._acks: dict[int, asyncio.Future[ReasonCode | None]] = {}
        self._subacks: dict[int, asyncio.Future[list[ReasonCode] | None]] = {}
        self._incoming: deque[Incoming] = deque()
        self._client = self._paho(options)

    # --- paho's client and its callbacks (all on the event loop's thread) ---------------------

    def _paho(self, options: Options) -> paho.Client:
        client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=options.client_id,
            # Commands sent while the table was away are stale: no persistent session.
            clean_session=None if options.v5 else True,
            protocol=paho.MQTTv5 if options.v5 else paho.MQTTv311,
            reconnect_on_failure=False,
        )
        client.max_inflight_messages_set(options.max_inflight)
        if options.logger is not None:
            client.enable_logger(options.logger)
        if options.username is not None:
            client.username_pw_set(options.username, options.password)
        if options.tls_context is not None:
            client.tls_set_context(options.tls_context)
        if options.will is not None:
            will = options.will
            client.will_set(will.topic, will.payload, will.qos, will.retain)
        client.on_connect = self._on_connack
        client.on_disconnect = self._on_gone
        client.on_publish = self._on_puback
        client.on_subscribe = self._on_suback
        client.on_message = self._on_delivered
        return client

    def _on_connack(
        self,
        client: paho.Client,
        userdata: Any,
        flags: paho.ConnectFlags,
        code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        if not self._connack.done():
            self._connack.set_result(code)

    def _on_puback(
        self, client: paho.Client, userdata: Any, mid: int, code: ReasonCode, props: Properties
    ) -> None:
        future = self._acks.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(code)

    def _on_suback(
        self,
        client: paho.Client,
        userdata: Any,
        mid: int,
        codes: list[ReasonCode],
        properties: Properties,
    ) -> None:
        future = self._subacks.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(list(codes))

    def _on_delivered(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        try:
            topic = message.topic
        except UnicodeDecodeError:
            log.warning("mqtt_message_dropped", reason="its topic is not UTF-8")
            return
        if len(self._incoming) >= self.options.incoming_limit:
            log.warning("mqtt_message_dropped", reason=f"{len(self._incoming)} waiting to be read")
            return
        payload = bytes(message.payload)
        self._incoming.append(
            Incoming(topic, payload, message.qos, message.retain, message.properties)
        )
        if not self._news.done():
            self._news.set_result(None)

    def _on_gone(
        self,
        client: paho.Client,
        userdata: Any,
        flags: paho.DisconnectFlags,
        code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        if flags.is_disconnect_packet_from_server:
            reason = f"the broker disconnected: {code}"
        elif code.is_failure:
            reason = f"connection lost: {code}"
        else:
            reason = "disconnected"
        if self.error is None and self._driver is not None:  # else released already
            self._driver.soon(self._lose, LinkError(reason))

    def _lose(self, error: LinkError) -> None:
        """The link is gone: whatever waits on it wakes (and raises ``error``)."""
        if self.error is not None:
            return
        self.error = error
        if self._driver is not None:
            self._driver.detach()
        if not self._connack.done():
            self._connack.set_result(None)
        for pending in (self._acks, self._subacks):
            for future in pending.values():
                if not future.done():
                    future.set_result(None)
            pending.clear()
        for wake in (self._news, self._closed):
            if not wake.done():
                wake.set_result(None)

    def _failure(self) -> LinkError:
        return self.error or LinkError("connection lost")

    # --- connecting and closing ---------------------------------------------------------------

    async def __aenter__(self) -> Session:
        loop = asyncio.get_running_loop()
        self._connack: asyncio.Future[ReasonCode | None] = loop.create_future()
        self._closed: asyncio.Future[None] = loop.create_future()
        self._news: asyncio.Future[None] = loop.create_future()
        options = self.options
        driver = self._driver = SocketDriver(self._client, options.socket_options, self._lose)
        try:
            try:
                await asyncio.to_thread(
                    self._client.connect,
                    self.host,
                    self.port,
                    options.keepalive,
                    clean_start=True if options.v5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
                    properties=options.connect_properties,
                )
            except (OSError, ValueError) as exc:
                raise LinkError(f"cannot connect: {type(exc).__name__}: {exc}") from None
            driver.flush()
            code = await self._reply(self._connack, "CONNACK")
            if code.is_failure:
                raise ConnectRefused(code)
        except BaseException:
            self._release()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """A DISCONNECT (the broker then drops the will), unless the link is gone already."""
        try:
            if self.error is None and self._client.disconnect() == paho.MQTT_ERR_SUCCESS:
                self._flush()
                await asyncio.wait({self._closed}, timeout=self.options.timeout)
        finally:
            self._release()

    def _release(self) -> None:
        """Nothing of this session left open, whatever state paho is in."""
        self._lose(self.error or LinkError("closed"))
        if self._driver is not None:
            self._driver.close()

    # --- using it -----------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        properties: Properties | None = None,
    ) -> asyncio.Future[ReasonCode | None]:
        """Publish; the future of the PUBACK's reason code (QoS 0: of the write), or None if
        the link was lost first. The message is written at once if the socket takes it."""
        if self.error is not None or self._driver is None:
            raise self._failure()
        info = self._client.publish(topic, payload, qos, retain, properties)
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise LinkError(f"could not publish: {paho.error_string(info.rc)}")
        future: asyncio.Future[ReasonCode | None] = self._driver.loop.create_future()
        self._acks[info.mid] = future
        self._flush()
        return future

    async def acked(self, future: asyncio.Future[ReasonCode | None], timeout: float) -> ReasonCode:
        """The reason code ``future`` brings; LinkError if the link is lost or it takes longer
        than ``timeout`` seconds."""
        return await self._reply(future, "PUBACK", timeout)

    async def publish_acked(
        self,
        topic: str,
        payload: bytes,
        *,
        retain: bool = False,
        properties: Properties | None = None,
        timeout: float = 10.0,
    ) -> ReasonCode:
        """Publish at QoS 1 and return the PUBACK's reason code (a failure code is returned,
        not raised: the caller decides what a refusal means)."""
        future = self.send(topic, payload, qos=1, retain=retain, properties=properties)
        return await self.acked(future, timeout)

    async def subscribe(self, topic: str, qos: int = 1) -> list[ReasonCode]:
        """Subscribe; the SUBACK's reason codes (a refusal is a failure code, not raised)."""
        if self.error is not None or self._driver is None:
            raise self._failure()
        rc, mid = self._client.subscribe(topic, qos)
        if rc != paho.MQTT_ERR_SUCCESS or mid is None:
            raise LinkError(f"could not subscribe: {paho.error_string(rc)}")
        future: asyncio.Future[list[ReasonCode] | None] = self._driver.loop.create_future()
        self._subacks[mid] = future
        self._flush()
        return await self._reply(future, "SUBACK")

    async def messages(self) -> AsyncIterator[Incoming]:
        """What the subscriptions deliver, in order, until the link is lost (LinkError)."""
        while True:
            while self._incoming:
                yield self._incoming.popleft()
            if self.error is not None or self._driver is None:
                raise self._failure()
            self._news = self._driver.loop.create_future()
            await asyncio.wait({self._news, self._closed}, return_when=asyncio.FIRST_COMPLETED)

    async def _reply(
        self, future: asyncio.Future[T | None], what: str, timeout: float | None = None
    ) -> T:
        """What ``future`` brings; LinkError if the link is lost or it takes longer than
        ``timeout`` seconds (the session's own timeout by default)."""
        wait = self.options.timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(wait):
                result = await future
        except TimeoutError:
            raise LinkError(f"no {what} within {wait:g} s") from None
        if result is None:
            raise LinkError(f"no {what}: {self._failure()}")
        return result

    def _flush(self) -> None:
        if self._driver is not None:
            self._driver.flush()


def _ignore(client: paho.Client, userdata: Any, sock: Any) -> None:
    """A socket callback for a session that is over."""


def describe(exc: BaseException) -> str:
    """One line for the log and ``last_error``: the first exception in ``exc`` (a group's
    first leaf that is not a cancellation), its type and message."""
    leaves = [e for e in _leaves(exc) if not isinstance(e, asyncio.CancelledError)]
    first = leaves[0] if leaves else exc
    return f"{type(first).__name__}: {first}"[:300]


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
