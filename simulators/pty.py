"""The device end of a pseudo-terminal, for simulators that the real serial driver talks to.

``PtyPort`` opens a pty (``os.openpty``) in raw mode and, if given ``link``, points that symlink
at the pty's slave, as udev points ``/dev/paigow-shuffler`` at a ttyUSB. ``unplug`` closes the
pty (the driver reading the slave sees the device vanish) and removes the symlink; ``replug``
opens a new pty and re-links the symlink, so a driver configured with the link path finds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import struct
import termios
import tty
from collections.abc import Callable
from pathlib import Path

import structlog

_log = structlog.get_logger(__name__)

WRITE_STALL_TIMEOUT = 2.0
DRAIN_TIMEOUT = 1.0
DRAIN_POLL = 0.005
DRAIN_QUIET = 0.05


class PtyPort:
    """A pty whose master the simulator holds. Not open until ``open``/``replug``."""

    def __init__(self, link: str | os.PathLike[str] | None = None) -> None:
        self.link = Path(link) if link is not None else None
        self._master: int | None = None
        self._slave: int | None = None
        self.slave_path = ""
        self._receiver: Callable[[bytes], None] | None = None
        self._write_lock = asyncio.Lock()

    @property
    def is_open(self) -> bool:
        return self._master is not None

    @property
    def path(self) -> str:
        """What the daemon should open: the symlink if there is one, else the slave."""
        return str(self.link) if self.link is not None else self.slave_path

    def describe(self) -> str:
        return f"pty {self.path}"

    def set_receiver(self, receiver: Callable[[bytes], None]) -> None:
        """Call ``receiver`` with the bytes the host writes (host → device)."""
        self._receiver = receiver

    async def open(self) -> None:
        self._open()

    def _open(self) -> None:
        if self._master is not None:
            return
        master, slave = os.openpty()
        # raw before anyone writes: a cooked pty would echo and translate CR to LF
        tty.setraw(slave)
        os.set_blocking(master, False)
        self._master, self._slave = master, slave
        self.slave_path = os.ttyname(slave)
        if self.link is not None:
            tmp = self.link.with_name(self.link.name + ".new")
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            tmp.symlink_to(self.slave_path)
            os.replace(tmp, self.link)
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().add_reader(master, self._readable)
        _log.debug("pty_open", slave=self.slave_path, link=str(self.link))

    def _readable(self) -> None:
        if self._master is None:
            return
        try:
            data = os.read(self._master, 4096)
        except BlockingIOError:
            return
        except OSError:
            # EIO while no one holds the slave: nothing to read
            data = b""
        if data and self._receiver is not None:
            self._receiver(data)

    async def write(self, data: bytes) -> bool:
        """Write all of ``data`` (device → host); False if the port is unplugged or stalled."""
        async with self._write_lock:
            view = memoryview(data)
            while view:
                master = self._master
                if master is None:
                    return False
                try:
                    written = os.write(master, view)
                except BlockingIOError:
                    if not await self._wait_writable(master):
                        _log.warning("pty_write_stalled", slave=self.slave_path)
                        return False
                    continue
                except OSError:
                    return False
                view = view[written:]
            return True

    async def _wait_writable(self, fd: int) -> bool:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def writable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_writer(fd, writable)
        try:
            async with asyncio.timeout(WRITE_STALL_TIMEOUT):
                await ready
            return True
        except TimeoutError:
            return False
        finally:
            with contextlib.suppress(Exception):
                loop.remove_writer(fd)

    def unread(self) -> int:
        """Bytes written that the host has not read yet (0 when unplugged)."""
        if self._slave is None:
            return 0
        try:
            raw = fcntl.ioctl(self._slave, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return 0
        count: int = struct.unpack("i", raw)[0]
        return count

    async def drain(self, timeout: float = DRAIN_TIMEOUT) -> bool:
        """Wait until the host has read everything written, as a wire would have carried it.

        A pty drops unread bytes when it closes; a cable does not take back bytes already sent.
        The kernel moves written bytes to the slave's queue a moment later, so "read" means the
        queue stayed empty for DRAIN_QUIET s. False if that did not happen within ``timeout``.
        """
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while True:
                    if self.unread():
                        quiet_since = loop.time()
                    elif loop.time() - quiet_since >= DRAIN_QUIET:
                        return True
                    await asyncio.sleep(DRAIN_POLL)
        return False

    async def unplug(self) -> None:
        """The cable is pulled: close the pty (after the host read what was sent) and remove
        the symlink."""
        await self.drain()
        self._close()

    async def replug(self) -> None:
        """The cable is back: a new pty, and the symlink points at it."""
        self._open()

    async def close(self) -> None:
        self._close()

    def _close(self) -> None:
        master, slave = self._master, self._slave
        self._master = self._slave = None
        if master is not None:
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().remove_reader(master)
            os.close(master)
        if slave is not None:
            os.close(slave)
        if self.link is not None:
            with contextlib.suppress(FileNotFoundError):
                self.link.unlink()
