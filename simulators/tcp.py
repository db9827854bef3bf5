"""The device end as a TCP server, as a serial-device server (ser2net) would present it.

``unplug`` stops the server and drops every connection (the server is gone); ``replug`` listens
again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class TcpServerPort:
    """A TCP server on ``host``:``port`` (port 0 picks a free one at the first ``open``)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self._receiver: Callable[[bytes], None] | None = None

    @property
    def is_open(self) -> bool:
        return self._server is not None

    @property
    def path(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        return f"tcp {self.path}"

    @property
    def client_count(self) -> int:
        return len(self._clients)

    def set_receiver(self, receiver: Callable[[bytes], None]) -> None:
        self._receiver = receiver

    async def open(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(
            self._client, self.host, self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            while data := await reader.read(4096):
                if self._receiver is not None:
                    self._receiver(data)
        except OSError:
            pass
        finally:
            self._clients.discard(writer)
            writer.close()

    async def write(self, data: bytes) -> bool:
        """Send to every connected client; False if none got it."""
        sent = False
        for writer in list(self._clients):
            try:
                writer.write(data)
                await writer.drain()
                sent = True
            except OSError:
                self._clients.discard(writer)
        return sent

    async def unplug(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in list(self._clients):
            writer.close()
        self._clients.clear()
        with contextlib.suppress(Exception):
            await server.wait_closed()

    async def replug(self) -> None:
        await self.open()

    async def close(self) -> None:
        await self.unplug()
