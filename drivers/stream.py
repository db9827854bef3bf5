"""A byte-stream device: one transport (serial or TCP) plus one codec, reconnecting forever.

``StreamDevice.run`` opens the transport, greets the device, feeds every byte to the codec and
puts the codec's events on the sink. When the link goes (unplug, cable pulled, server gone, pty
closed) it reports ``DeviceOffline`` and reopens with capped exponential backoff; once the
device sends a well-formed frame on a new link it reports ``DeviceOnline``
(drivers/reconnect.py). Two timers run while connected: an inter-byte timeout that gives up on
a partial frame (``FrameError(error="truncated")``) and, for card sources, a deal silence
timeout (``DeviceFault(code="silence")``). Nothing but CancelledError leaves ``run``.

Every event of the codec goes on the sink, also before the device's first good frame: noise on
a line that never carried a frame (a wrong baud rate, a device babbling at power-up, a server's
error text) is reported as ``FrameError`` like noise after one; the daemon's limiter
(controller/table/limits.py) turns a stream of them into one alarm per interval. Endless noise
costs no memory: the codec counts a run of noise rather than keeping it, and the bytes read but
not yet decoded are at most a read or two (``QueueProtocol``).
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
    FrameError,
)
from drivers.framing import Codec, ReferenceCodec
from drivers.reconnect import Presence, keep_connected

_log = structlog.get_logger(__name__)

DEFAULT_BACKOFF: Final = Backoff(initial=0.1, factor=2.0, cap=1.0)
CLOSE_TIMEOUT: Final = 2.0
TIMER_SLACK: Final = 0.001  # asyncio may wake a timer a hair early


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
    """An asyncio protocol that queues what it receives, for ``ProtocolLink``.

    The queue stays small whatever the device sends: ``StreamDevice`` takes everything queued
    each time it runs and yields only when the queue is empty, and the transport adds at most
    one read each turn of the event loop (1 KB for serial, up to 256 KB for TCP).
    """

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
        # asyncio.wait, not wait_for: on 3.11, wait_for swallows a cancellation that arrives as
        # the future completes, and a driver being stopped as its link went would never stop
        await asyncio.wait({self._protocol.lost}, timeout=CLOSE_TIMEOUT)


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
        self._presence: Presence | None = None

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
        """Connect, read and reconnect until cancelled (drivers/reconnect.py): online once the
        device sent a well-formed frame on a link, one offline report per outage."""
        self._presence = Presence(self.name, sink)
        await keep_connected(
            self._presence,
            self.backoff,
            open_link=self.transport.open,
            session=lambda link: self._session(link, sink),
            close_link=_close,
            cannot_open=lambda exc: f"cannot open {self.transport.describe()}: {exc}",
            unproven=lambda reason: f"no valid frame from {self.transport.describe()}: {reason}",
        )

    @property
    def _online(self) -> bool:
        return self._presence is not None and self._presence.online

    def _log(self) -> structlog.stdlib.BoundLogger:
        # Bound when used, not when built: the daemon configures logging after the drivers exist.
        log: structlog.stdlib.BoundLogger = _log.bind(device=self.name)
        return log

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
                    # the noise before the first good frame, then online, then the frame's events
                    before = _leading_noise(events)
                    self._emit(sink, events[:before])
                    events = events[before:]
                    assert self._presence is not None
                    self._presence.up(self.transport.describe())
                # Noise before any good frame is reported too (a wrong baud rate, a server's
                # error text): no fault is silent; the limiter keeps it to one alarm.
                self._emit(sink, events)
        except LinkClosed as exc:
            self._emit(sink, self.codec.flush())
            return f"link lost: {exc}"
        finally:
            self._link = None

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
            self._emit(sink, self.codec.flush())
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


async def _close(link: Link) -> None:
    await link.close()


def _leading_noise(events: list[DeviceEvent]) -> int:
    """How many events at the start of ``events`` report discarded bytes (no frame's events)."""
    for i, event in enumerate(events):
        if not (isinstance(event, FrameError) and event.discarded):
            return i
    return len(events)
