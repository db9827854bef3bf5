"""A Mosquitto of our own for the demo, the tests and the benchmarks (never the one on 1883).

``Mosquitto`` writes its config in a work directory, listens on one port of 127.0.0.1, and is
started, stopped (an outage), killed (a crash) and reloaded (SIGHUP) on that same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import socket
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Self

MOSQUITTO = "/usr/sbin/mosquitto"


# --- a private broker ----------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def with_parent(command: list[str]) -> list[str]:
    """``command`` made to get SIGTERM when we die (util-linux ``setpriv --pdeathsig``), so a
    killed demo or test run leaves no broker behind (it exits within a second). Unchanged where
    setpriv is missing. (``preexec_fn`` could do it too, but is unsafe once threads exist.)"""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *command] if setpriv else command


class Mosquitto:
    """A Mosquitto broker of our own: its config in ``workdir``, one listener on 127.0.0.1,
    persistence off. ``start`` returns once the broker says it is running; ``stop`` and
    ``start`` again reuse the same port (an outage); ``reload`` sends SIGHUP (password file, ACL
    and ``allow_anonymous`` are re-read). ``listener_options`` go under the listener (TLS);
    ``options`` at the top level (auth, ACL)."""

    def __init__(
        self,
        workdir: Path,
        port: int = 0,
        *,
        listener_options: Iterable[str] = (),
        options: Iterable[str] = (),
        binary: str = MOSQUITTO,
        persistence: bool = False,
        autosave: int = 30,
    ) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.listener_options = list(listener_options)
        self.options = list(options)
        self.binary = binary
        self.persistence = persistence
        self.autosave = autosave
        self.starts = 0
        self.conf = workdir / "mosquitto.conf"
        self.log: deque[str] = deque(maxlen=2000)
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _persistence(self) -> list[str]:
        """With persistence the broker keeps sessions and queued QoS 1 messages in
        ``mosquitto.db``, written on a clean stop and every ``autosave`` seconds, read at start:
        a ``stop`` then ``start`` is a restart that loses no session; ``kill`` is a crash."""
        if not self.persistence:
            return ["persistence false"]
        return [
            "persistence true",
            f"persistence_location {self.workdir}/",
            "persistence_file mosquitto.db",
            f"autosave_interval {self.autosave}",
        ]

    def write_config(self) -> None:
        lines = [
            f"listener {self.port} 127.0.0.1",
            *self.listener_options,
            *self._persistence(),
            # Run as root, mosquitto would switch to the "mosquitto" user, who cannot read our
            # private directory; as anyone else this line changes nothing.
            f"user {pwd.getpwuid(os.getuid()).pw_name}",
            "log_dest stderr",  # unbuffered, unlike stdout into a pipe
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
            # Without it Nagle holds back PUBACKs: ~40 ms stalls per publish window.
            "set_tcp_nodelay true",
            *self.options,
        ]
        if not any(line.startswith("allow_anonymous") for line in self.options):
            lines.append("allow_anonymous true")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.conf.write_text("\n".join(lines) + "\n", encoding="utf-8")

    async def start(self, timeout: float = 10.0) -> None:
        if self.running:
            return
        self.write_config()
        self._proc = await asyncio.create_subprocess_exec(
            *with_parent([self.binary, "-c", str(self.conf)]),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            # Its own session: a terminal's Ctrl-C reaches the demo, which stops the broker
            # after the table has stopped (a broker dying first makes paho fail on closed fds).
            start_new_session=True,
        )
        self.starts += 1
        up: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(self._proc, up), name="mosquitto.log")
        try:
            await asyncio.wait_for(up, timeout)
        except BaseException:
            await self.kill()
            raise

    async def _read(self, proc: asyncio.subprocess.Process, up: asyncio.Future[None]) -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            self.log.append(line)
            if not up.done() and " running" in line:
                up.set_result(None)
        if not up.done():
            tail = "\n".join(list(self.log)[-10:])
            up.set_exception(RuntimeError(f"mosquitto exited on port {self.port}:\n{tail}"))

    async def stop(self, timeout: float = 10.0) -> None:
        """A clean stop (SIGTERM): with persistence, the broker saves its sessions first."""
        await self._end(signal.SIGTERM, timeout)

    async def kill(self) -> None:
        """A crash (SIGKILL): what the broker had not saved is gone."""
        await self._end(signal.SIGKILL, 5.0)

    async def _end(self, sig: signal.Signals, timeout: float) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.send_signal(sig)
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._reader, 5)
            self._reader = None

    def reload(self) -> None:
        """Re-read the config (SIGHUP)."""
        self.write_config()
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGHUP)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
