"""A byte-stream device: one transport (serial or TCP) plus one codec, reconnecting forever.

``StreamDevice.run`` opens the transport, greets the device, feeds every byte to the codec and
puts the codec's events on the sink. When the link goes (unplug, cable pulled, server gone, pty
closed) it reports ``DeviceOffline`` and reopens with capped exponential backoff; when the link
is back it reports ``DeviceOnline``. Two timers run while connected: an inter-byte timeout that
gives up on a partial frame (``FrameError(error="truncated")``) and, for card sources, a deal
silence timeout (``DeviceFault(code="silence")``). Nothing but CancelledError leaves ``run``.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import EllipsisType
from typing import ClassVar, Final, Protocol

import structlog

from drivers.base import Backoff, EventSink
from drivers.events import (
    DealEnded,
    DealStarted,
    DeviceEvent,
    DeviceFault,
    DeviceOffline,
    DeviceOnline,
)
from drivers.framing import Codec, ReferenceCodec

_log = structlog.get_logger(__name__)

DEFAULT_BACKOFF: Final = Backoff(initial=0.1, factor=2.0, cap=1.0)
CLOSE_TIMEOUT: Final = 2.0
STABLE_SESSION: Final = 5.0  # a link that lasted this long resets the backoff
TIMER_SLACK: Final = 0.001  # asyncio may wake a timer a hair early
MAX_ATTEMPT: Final = (
    32  # Backoff.delay overflows a float near attempt 1024; the cap is long reached
)


class LinkClosed(Exception):
    """The link went away; the message says why."""


class Link(Protocol):
    """An open connection to a device."""

    async def read(self) -> bytes:
        """The next bytes (never empty); raises LinkClosed when the link is gone."""
        ...

    def write(self, data: bytes) -> None: ...

    async def close(self) -> None:
        """Close and wait (briefly) until the OS resource is released; never raises."""
        ...


class Transport(Protocol):
    """How to reach a device. ``open`` raises OSError (or TimeoutError) when it cannot."""

    def describe(self) -> str: ...

    async def open(self) -> Link: ...


class QueueProtocol(asyncio.Protocol):
    """An asyncio protocol that queues what it receives, for ``ProtocolLink``."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.lost = asyncio.get_running_loop().create_future()
        self.reason = "closed"

    def data_received(self, data: bytes) -> None:
        if data:
            self.queue.put_nowait(data)

    def eof_received(self) -> bool | None:
        self.reason = "end of stream"
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self.reason = str(exc) or type(exc).__name__
        self.queue.put_nowait(None)
        if not self.lost.done():
            self.lost.set_result(None)


class ProtocolLink:
    """A Link over an asyncio transport whose protocol is a QueueProtocol."""

    def __init__(self, transport: asyncio.BaseTransport, protocol: QueueProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self) -> bytes:
        item = await self._protocol.queue.get()
        if item is None:
            self._protocol.queue.put_nowait(None)
            raise LinkClosed(self._protocol.reason)
        return item

    def write(self, data: bytes) -> None:
        if isinstance(self._transport, asyncio.WriteTransport):
            self._transport.write(data)

    async def close(self) -> None:
        # abort, not close: a graceful close drains output first, which can hang on a dead port
        with contextlib.suppress(Exception):
            if not self._transport.is_closing():
                if isinstance(self._transport, asyncio.WriteTransport):
                    self._transport.abort()
                else:
                    self._transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._protocol.lost), CLOSE_TIMEOUT)


class StreamDevice:
    """A device driver: transport + codec, with reconnect and the two timers (module doc).

    A device role subclasses it with its reference codec and silence timeout as class
    defaults; a vendor's codec is passed as ``codec``. ``silence_timeout=None`` turns the
    silence timer off; left out, the class default applies.
    """

    default_codec: ClassVar[type[ReferenceCodec] | None] = None
    default_silence_timeout: ClassVar[float | None] = None

    def __init__(
        self,
        name: str,
        transport: Transport,
        codec: Codec | None = None,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
        frame_timeout: float = 0.25,
        silence_timeout: float | EllipsisType | None = ...,
    ) -> None:
        if codec is None:
            if self.default_codec is None:
                raise TypeError(f"{type(self).__name__} needs a codec")
            codec = self.default_codec(name)
        self.name = name
        self.transport = transport
        self.codec = codec
        self.backoff = backoff
        self.frame_timeout = frame_timeout
        self.silence_timeout: float | None = (
            self.default_silence_timeout
            if isinstance(silence_timeout, EllipsisType)
            else silence_timeout
        )
        self._link: Link | None = None
        self._in_deal = False
        self._online = False

    @property
    def connected(self) -> bool:
        return self._link is not None

    def send(self, data: bytes) -> bool:
        """Write bytes to the device if connected; False when there is no link."""
        if self._link is None:
            return False
        self._link.write(data)
        return True

    async def run(self, sink: EventSink) -> None:
        """Connect, read and reconnect until cancelled. Emits DeviceOnline once the device has
        sent a well-formed frame on a link, and one DeviceOffline per outage: a link that closes
        before any valid frame (a serial-device server whose device is absent accepts, writes an
        error text and closes) neither brings the device online nor reports it offline again."""
        attempt = 0
        offline_reported = False
        try:
            while True:
                try:
                    link = await self.transport.open()
                except Exception as exc:
                    if not offline_reported:
                        reason = f"cannot open {self.transport.describe()}: {exc}"
                        self._emit(sink, [DeviceOffline(device=self.name, reason=reason)])
                        self._log().warning("device_unreachable", reason=reason)
                        offline_reported = True
                    await self.backoff.sleep(attempt)
                    attempt = min(attempt + 1, MAX_ATTEMPT)
                    continue
                began = asyncio.get_running_loop().time()
                reason = await self._session(link, sink)
                was_online, self._online = self._online, False
                # a link that drops at once (ser2net without its device) keeps backing off
                if asyncio.get_running_loop().time() - began >= STABLE_SESSION:
                    attempt = 0
                if was_online or not offline_reported:
                    if not was_online:
                        reason = f"no valid frame from {self.transport.describe()}: {reason}"
                    self._log().warning("device_offline", reason=reason)
                    self._emit(sink, [DeviceOffline(device=self.name, reason=reason)])
                    offline_reported = True
                await self.backoff.sleep(attempt)
                attempt = min(attempt + 1, MAX_ATTEMPT)
        except asyncio.CancelledError:
            if self._online:
                self._online = False
                self._emit(sink, [DeviceOffline(device=self.name, reason="driver stopped")])
            raise

    def _log(self) -> structlog.stdlib.BoundLogger:
        # Bound when used, not when built: the daemon configures logging after the drivers exist.
        log: structlog.stdlib.BoundLogger = _log.bind(device=self.name)
        return log

    def _announce(self, sink: EventSink) -> None:
        """The first well-formed frame on this link: the device is really there."""
        self._online = True
        self._log().info("device_online", link=self.transport.describe())
        self._emit(sink, [DeviceOnline(device=self.name, detail=self.transport.describe())])

    async def _session(self, link: Link, sink: EventSink) -> str:
        """Read until the link goes; returns why it went. Closes the link whatever happens."""
        self._link = link
        self._in_deal = False
        self.codec.reset()
        loop = asyncio.get_running_loop()
        last_bytes = loop.time()
        try:
            greeting = self.codec.greeting()
            if greeting:
                link.write(greeting)
            while True:
                try:
                    async with asyncio.timeout_at(self._deadline(last_bytes)):
                        data = await link.read()
                except TimeoutError:
                    self._on_timeout(sink, loop.time() - last_bytes)
                    continue
                last_bytes = loop.time()
                events = self.codec.feed(data)
                if not self._online and self.codec.frames:
                    self._announce(sink)
                if self._online:
                    self._emit(sink, events)
                else:
                    # Bytes that are not the device speaking (a server's error text): one line.
                    self._log().debug("noise_before_first_frame", size=len(data))
        except LinkClosed as exc:
            if self._online:
                self._emit(sink, self.codec.flush())
            return f"link lost: {exc}"
        except Exception as exc:
            # a bug here must not stop the table: log it, drop the link, reconnect
            self._log().exception("driver_error")
            return f"driver error: {exc!r}"
        finally:
            self._link = None
            await link.close()

    def _deadline(self, last_bytes: float) -> float | None:
        deadlines = []
        if self.codec.pending:
            deadlines.append(last_bytes + self.frame_timeout)
        if self._in_deal and self.silence_timeout is not None:
            deadlines.append(last_bytes + self.silence_timeout)
        return min(deadlines) if deadlines else None

    def _on_timeout(self, sink: EventSink, quiet: float) -> None:
        quiet += TIMER_SLACK
        if self.codec.pending and quiet >= self.frame_timeout:
            flushed = self.codec.flush()
            if self._online:
                self._emit(sink, flushed)
        if self._in_deal and self.silence_timeout is not None and quiet >= self.silence_timeout:
            self._in_deal = False
            detail = f"no data for {self.silence_timeout:g} s during a deal"
            self._log().warning("deal_silence", detail=detail)
            self._emit(sink, [DeviceFault(device=self.name, code="silence", detail=detail)])

    def _emit(self, sink: EventSink, events: list[DeviceEvent]) -> None:
        for event in events:
            if isinstance(event, DealStarted):
                self._in_deal = True
            elif isinstance(event, DealEnded):
                self._in_deal = False
            try:
                sink.put_nowait(event)
            except Exception:
                self._log().exception("sink_rejected_event", event_kind=event.kind)
