"""One daemon per journal, per device and per dealer-page port (issue 39), as a lab user or a
container would start a second `paigow-table run` by hand next to the unit's: on the same config
it exits 69 at once with one line naming the journal and the pid that holds it, and the journal
stays sound (`audit verify`); with its own journal but the same devices it cannot open them (the
serial ports are opened exclusively), so it never splits the first one's frames; with its own
journal and devices but the same page port it exits 69 naming the port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import serial  # type: ignore[import-untyped]

from controller.journal.lock import JournalInUse, JournalLock
from controller.wiring import EXIT_IN_USE
from simulators.demo import DEMO_CONFIG
from simulators.mosquitto import free_port
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator
from tests.journal.conftest import cli

pytestmark = pytest.mark.daemon


def _config(path: Path, devices: Path, journal: Path, port: int) -> Path:
    path.write_text(
        DEMO_CONFIG.format(
            table="PG-L2", shuffler=devices / "shuffler", rng=devices / "rng", journal=journal
        )
        + f'\n[display]\nhost = "127.0.0.1"\nport = {port}\n'
    )
    return path


def _run(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _listening(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError("the first daemon never listened")


def _count(journal: Path, sql: str) -> int:
    if not journal.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
        try:
            return int(conn.execute(sql).fetchone()[0])
        except sqlite3.OperationalError:  # not made yet
            return 0


async def _until(journal: Path, sql: str, at_least: int) -> None:
    deadline = time.monotonic() + 30
    while _count(journal, sql) < at_least:
        assert time.monotonic() < deadline, f"never {at_least}: {sql}"
        await asyncio.sleep(0.1)


ONLINE = "SELECT count(DISTINCT payload) FROM events WHERE kind = 'device_online'"
CLOSED = "SELECT count(*) FROM rounds WHERE status != 'open'"


async def _run_to_end(config: Path) -> subprocess.CompletedProcess[str]:
    """``paigow-table run`` that is expected to refuse, waited for (off the event loop)."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _said(stderr: str) -> list[str]:
    """What the command said to a person (a development install also logs its JSON warning)."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("{")]


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    return err


async def test_a_second_run_is_refused_by_the_journal_the_devices_and_the_port(
    tmp_path: Path,
) -> None:
    port = free_port()
    journal = tmp_path / "journal.sqlite3"
    first_config = _config(tmp_path / "table.toml", tmp_path, journal, port)
    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=3)
    rng = RngSimulator(PtyPort(tmp_path / "rng"), seed=3)
    async with shuffler, rng:
        first = _run(first_config)
        try:
            await _listening(port, first)
            await _until(journal, ONLINE, 2)
            for n in range(2):
                await rng.press()
                await shuffler.deal()
                await _until(journal, CLOSED, n + 1)
            # The same config: refused at once, one line naming the journal and the holder.
            again = await _run_to_end(first_config)
            assert again.returncode == EXIT_IN_USE, again.stderr
            [line] = _said(again.stderr)
            print(f"second run: exit {again.returncode}: {line}")
            assert str(journal) in line and f"pid {first.pid}" in line
            # Its own journal, the same page port: refused at start, naming the port.
            other = tmp_path / "other"
            other.mkdir()
            port_config = _config(tmp_path / "port.toml", other, other / "j.sqlite3", port)
            taken = await _run_to_end(port_config)
            assert taken.returncode == EXIT_IN_USE, taken.stderr
            [line] = _said(taken.stderr)
            print(f"its page's port taken: exit {taken.returncode}: {line}")
            assert f"127.0.0.1:{port}" in line and "Address already in use" in line
            assert not (other / "j.sqlite3").exists()  # refused before it wrote anything
            # The devices themselves: a second opening of the shuffler's port is refused.
            with pytest.raises(serial.SerialException, match="exclusive"):
                serial.Serial(str(tmp_path / "shuffler"), exclusive=True)
            await rng.press()
            await shuffler.deal()
            await _until(journal, CLOSED, 3)
        finally:
            err = _stop(first)
    assert "Traceback" not in err
    verified = cli("audit", "verify", "--journal", str(journal))
    assert verified.returncode == 0, verified.stderr
    assert "3 dealt again" in verified.stdout + verified.stderr


async def test_a_second_daemon_with_its_own_journal_cannot_take_the_devices(
    tmp_path: Path,
) -> None:
    """The frames stay the first daemon's: the second one's serial drivers cannot open the
    ports (flock), so it reports them offline and deals nothing; the first one's rounds are all
    whole (no deck-integrity alarm from frames split between two readers)."""
    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=4)
    rng = RngSimulator(PtyPort(tmp_path / "rng"), seed=4)
    first_port, second_port = free_port(), free_port()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    async with shuffler, rng:
        first = _run(_config(a / "t.toml", tmp_path, a / "j.sqlite3", first_port))
        second = None
        try:
            await _listening(first_port, first)
            second = _run(_config(b / "t.toml", tmp_path, b / "j.sqlite3", second_port))
            await _listening(second_port, second)
            await _until(a / "j.sqlite3", ONLINE, 2)
            for n in range(4):
                await rng.press()
                await shuffler.deal()
                await _until(a / "j.sqlite3", CLOSED, n + 1)
        finally:
            if second is not None:
                _stop(second)
            _stop(first)
    rounds = cli("audit", "recall", "--journal", str(a / "j.sqlite3"), "--last", "10", "--json")
    assert rounds.returncode == 0, rounds.stderr
    assert rounds.stdout.count('"status": "settled"') >= 4, rounds.stdout[:2000]
    assert "deck_integrity" not in rounds.stdout
    nothing = cli("audit", "recall", "--journal", str(b / "j.sqlite3"), "--last", "10")
    assert "PG-L2-" not in nothing.stdout  # the second daemon saw no card


def test_the_lock_names_its_holder_and_goes_with_the_process(tmp_path: Path) -> None:
    journal = tmp_path / "j.sqlite3"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from controller.journal.lock import JournalLock;"
            f"JournalLock({str(journal)!r}).acquire(); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(JournalInUse) as refused:
            JournalLock(journal).acquire()
        assert refused.value.pid == holder.pid and str(journal) in str(refused.value)
        # A planted pid in the lock file changes nothing: the kernel's lock decides.
        holder.kill()  # kill -9: no clean release
        holder.wait(10)
        (tmp_path / "j.sqlite3.lock").write_text(f"{os.getpid()}\n")
        with JournalLock(journal) as lock:
            assert lock.path.read_text() == f"{os.getpid()}\n"
    finally:
        holder.kill()
