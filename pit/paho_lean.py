"""The MQTT 5 properties of every incoming PUBLISH, read at a fraction of paho's cost (issue 31).

paho 2.x builds a new :class:`~paho.mqtt.properties.Properties` for each PUBLISH it reads: three
tables of every property's name, type and packets (about 60 objects), then ``clear()`` walks the
27 names. Draining a queued session of 2 KB messages through the pit's client
(``bench/mqtt_read.py``, the collector frozen as in the pit): 0.043 ms of CPU a message on MQTT 5
as paho reads it, 0.033 with this, 0.030 on MQTT 3.1.1 (no properties); with the read buffer
below too, 0.016. Without the frozen collector those 60 objects a message cost more again.

:func:`install` replaces the class that paho's PUBLISH decoder (``paho.mqtt._packet``) makes
with :class:`LeanProperties`: the same class (a subclass: every method, ``unpack`` and its
checks included), whose three tables are built once and shared (paho only reads them), and
whose ``clear()`` does nothing when nothing is set. Properties a message carries are read as
before (tested: ``tests/pit/test_paho_lean.py``). Nothing else of paho is touched: the
properties the pit sends (CONNECT, SUBSCRIBE) are paho's own.

:func:`buffer_reads` gives one connection's reads a buffer (:class:`ReadBuffer`): paho reads a
packet with three or four ``recv`` calls and the event loop wakes once a packet; with it, one
call brings what has arrived and the pit's reader (``pit.ingest._Client``) reads every packet
in it before it returns to the loop.

What it relies on: paho's private module ``paho.mqtt._packet`` naming ``Properties`` and
``decode_publish``, and its client's ``_sock_recv`` (paho 2.1–2.x). Where they are not, nothing
is changed (:func:`install` says False, :func:`buffer_reads` None), and the pit reads as paho
does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from paho.mqtt.properties import Properties

_TABLES = ("types", "names", "properties")


class LeanProperties(Properties):
    """paho's Properties with its lookup tables shared, not built for every message."""

    _shared: dict[str, Any] | None = None

    def __init__(self, packetType: int) -> None:
        shared = LeanProperties._shared
        if shared is None:
            model = Properties(packetType)  # type: ignore[no-untyped-call]
            shared = LeanProperties._shared = {name: getattr(model, name) for name in _TABLES}
        object.__setattr__(self, "packetType", packetType)
        for name, table in shared.items():
            object.__setattr__(self, name, table)

    def clear(self) -> None:
        if len(self.__dict__) > 1 + len(_TABLES):  # a property set besides the four
            super().clear()  # type: ignore[no-untyped-call]


def install() -> bool:
    """Whether paho's PUBLISH decoder now makes :class:`LeanProperties` (once is enough)."""
    try:
        from paho.mqtt import _packet
    except ImportError:
        return False
    if getattr(_packet, "Properties", None) is LeanProperties:
        return True
    if getattr(_packet, "Properties", None) is not Properties or not hasattr(
        _packet, "decode_publish"
    ):
        return False
    _packet.Properties = LeanProperties  # type: ignore[attr-defined]
    return True


class ReadBuffer:
    """paho's reads of one connection from a buffer of up to 64 KB: paho asks its socket for
    one byte, then the remaining length a byte at a time, then the rest, three or four
    ``recv`` calls a packet; with the buffer one call brings every packet that has arrived.
    ``pending`` tells the reader callback to go on reading what is buffered (the socket does
    not wake the event loop again for bytes already taken off it)."""

    SIZE = 65536

    def __init__(self, recv: Callable[[int], bytes]) -> None:
        self._recv = recv
        self._data = b""
        self._at = 0
        #: bytes handed to paho so far (the reader's measure of progress)
        self.taken = 0

    def recv(self, size: int) -> bytes:
        if self._at >= len(self._data):
            data = self._recv(max(size, self.SIZE))  # BlockingIOError when nothing came
            if len(data) <= size:
                self.taken += len(data)
                return data  # what paho asked for, or the end of the connection (b"")
            self._data, self._at = data, 0
        out = self._data[self._at : self._at + size]
        self._at += len(out)
        self.taken += len(out)
        return out

    def pending(self) -> bool:
        return self._at < len(self._data)


def buffer_reads(client: Any) -> ReadBuffer | None:
    """paho ``client``'s reads through a :class:`ReadBuffer`, or None (nothing changed) where
    paho has no ``_sock_recv`` to give it (not paho 2.x)."""
    recv = getattr(client, "_sock_recv", None)
    if recv is None or not callable(recv):
        return None
    already = getattr(recv, "__self__", None)
    if isinstance(already, ReadBuffer):  # a socket opened again: a new buffer, paho's recv
        recv = already._recv
    buffer = ReadBuffer(recv)
    client._sock_recv = buffer.recv
    return buffer
