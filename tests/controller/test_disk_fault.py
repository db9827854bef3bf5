"""A full disk on a real small filesystem (a tmpfs, as root), the daemon as a process, killed
during the fault and restarted the way the unit restarts it (docs/faults.md): the fault and
every deal seen during it are on file before the kill, the restart on the still-full disk loses
nothing, and once space is back the deals are voided, the fault stays latched until a person
acknowledges it, and the table deals on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from simulators.demo import DEMO_CONFIG
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    # CI and every machine of this project run as root: a real small filesystem is mounted.
    assert os.geteuid() == 0, "mounting a tmpfs needs root: run the suite as root (CI does)"
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _config(tmp: Path, disk: Path) -> Path:
    text = DEMO_CONFIG.format(
        table="PG-DF", shuffler=tmp / "shuffler", rng=tmp / "rng", journal=disk / "journal.sqlite3"
    ).replace('synchronous = "FULL"\n', 'synchronous = "FULL"\nreserve_mb = 4\nmin_free_mb = 8\n')
    path = tmp / "table.toml"
    path.write_text(text + "\n[display]\nport = 0\n")
    return path


def _start(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _query(journal: Path, sql: str) -> list[tuple[object, ...]]:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
            return list(conn.execute(sql).fetchall())
    except sqlite3.OperationalError:  # not made yet
        return []


def _count(journal: Path, kind: str) -> int:
    return len(_query(journal, f"SELECT id FROM events WHERE kind = '{kind}'"))


async def _until(
    condition: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            stderr = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"run exited {proc.returncode}: {stderr}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"not in time: {proc.communicate()[1].decode()[-2000:]}")
        await asyncio.sleep(0.1)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with filler.open("wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\xff" * 65536)
            f.flush()
    return filler


async def test_a_full_disk_through_a_kill_and_restarts_loses_no_deal(
    small_disk: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path, small_disk)
    journal = small_disk / "journal.sqlite3"
    reserve = small_disk / "journal.sqlite3.reserve"
    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=21)
    rng = RngSimulator(PtyPort(tmp_path / "rng"), seed=21)
    dealt: list[str] = []
    async with shuffler, rng:
        proc = _start(config)
        try:
            await _until(lambda: _count(journal, "device_online") >= 2, proc)
            assert reserve.stat().st_size == 4 * 2**20  # made at start
            for n in (1, 2):
                await rng.press()
                dealt.append((await shuffler.deal()).shuffle_id)

                def settled(count: int = n) -> bool:
                    rows = _query(journal, "SELECT 1 FROM rounds WHERE status = 'settled'")
                    return len(rows) == count

                await _until(settled, proc)
            filler = _fill(small_disk)
            for _ in range(3):  # the first tilts the table; all three are seen on the line
                await rng.press()
                dealt.append((await shuffler.deal()).shuffle_id)
            await _until(lambda: _count(journal, "deal_seen_in_fault") == 3, proc)
            assert not reserve.exists()  # released to record the fault
            began = _query(journal, "SELECT payload FROM events WHERE kind = 'journal_fault_began'")
            assert len(began) == 1 and "full" in json.loads(str(began[0][0]))["detail"]
            assert _count(journal, "disk_space") == 1  # the low disk reached the record too
            latched = _query(journal, "SELECT value FROM meta WHERE key = 'latched_alarms/PG-DF'")
            assert "table_fault" in str(latched)
        finally:
            proc.send_signal(signal.SIGKILL)  # kill -9 (or a power cut) during the fault
            proc.wait(10)
        seen = [
            json.loads(str(p))["shuffle_id"]
            for (p,) in _query(
                journal, "SELECT payload FROM events WHERE kind = 'deal_seen_in_fault'"
            )
        ]
        assert seen == dealt[2:]  # every deal of the fault on file before the kill

        # The unit restarts it on the disk still full: it may refuse (73) or come up in fault;
        # either way nothing on file is lost and nothing is settled.
        proc = _start(config)
        try:
            await asyncio.sleep(3)
            if proc.poll() is None:
                status = _query(journal, "SELECT count(*) FROM rounds WHERE status = 'settled'")
                assert status == [(2,)]
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(15)
        said = proc.stderr.read() if proc.stderr else b""
        # A loaded machine may take the 3 s to reach its refusal: a SIGTERM that finds it on its
        # way out with 73 ends it by the signal instead (what systemd counts a clean stop).
        refusing = code == -signal.SIGTERM and b"the table will not start" in said
        assert code in (0, 73) or refusing, said
        assert _count(journal, "deal_seen_in_fault") == 3

        filler.unlink()  # space is back
        proc = _start(config)
        try:
            await _until(lambda: _count(journal, "journal_fault") == 1, proc)
            voided = _query(
                journal,
                "SELECT result FROM rounds WHERE status = 'void' AND reason = 'journal_fault' "
                "ORDER BY seq",
            )
            assert [json.loads(str(r[0]))["shuffle_id"] for r in voided] == dealt[2:]
            await _until(lambda: reserve.exists() and reserve.stat().st_size == 4 * 2**20, proc)
            await rng.press()
            dealt.append((await shuffler.deal()).shuffle_id)
            await _until(
                lambda: len(_query(journal, "SELECT 1 FROM rounds WHERE status = 'settled'")) == 3,
                proc,
            )
            # The fault stays latched until a person acknowledges it.
            latched = _query(journal, "SELECT value FROM meta WHERE key = 'latched_alarms/PG-DF'")
            assert "table_fault" in str(latched)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
    rounds = _query(journal, "SELECT status FROM rounds ORDER BY seq")
    assert [r[0] for r in rounds] == ["settled", "settled", "void", "void", "void", "settled"]
