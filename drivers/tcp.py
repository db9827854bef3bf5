"""TCP transport, for serial-device servers (ser2net, Moxa NPort, ...) in raw TCP mode.

Keepalive is switched on so that a pulled network cable is noticed even while the device is
quiet; the server closing the connection is noticed at once.
"""

from __future__ import annotations

import asyncio
import socket

from drivers.stream import Link, ProtocolLink, QueueProtocol

KEEPALIVE_IDLE = 10
KEEPALIVE_INTERVAL = 5
KEEPALIVE_COUNT = 3


class TcpTransport:
    """A TCP connection to ``host``:``port``."""

    def __init__(self, host: str, port: int, *, connect_timeout: float = 5.0) -> None:
        if not host:
            raise ValueError("host: expected a host name or address")
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port: expected a TCP port 1–65535, got {port!r}")
        self.host = host
        self.port = port
        self.connect_timeout = connect_timeout

    def describe(self) -> str:
        return f"tcp {self.host}:{self.port}"

    async def open(self) -> Link:
        loop = asyncio.get_running_loop()
        protocol = QueueProtocol()
        async with asyncio.timeout(self.connect_timeout):
            transport, _ = await loop.create_connection(lambda: protocol, self.host, self.port)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            _keepalive(sock)
        return ProtocolLink(transport, protocol)


def _keepalive(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
    ):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
