"""What faults cost a running table (issue 13, docs/faults.md): line noise and a full disk.

The daemon runs as a real process (`paigow-table run`) with its shuffler and RNG box simulated
on ptys in this process and its display on a free port.

noise   A quiet deal first (the baseline: journal bytes and rows a round costs, the page's answer
        time while idle), then 200 KB of ``\\x02\\xff`` (a frame start and garbage, over and over)
        written to the shuffler's line as fast as the pty takes it, while /api/state is asked
        every 20 ms; then the next deal. Reported: journal and log growth of the noise against a
        round's, the page's answer times during the noise against idle, the alarms.

disk    Only as root with tmpfs: the journal on a 4 MB tmpfs; a filler file takes the rest of
        the space mid-session, rounds are dealt while it is full, the filler is removed, rounds
        are dealt on. Reported: every deal accounted for (settled, or void with a reason), the
        status seen on the page while full, and that the same process recovered (no restart).

Run: `.venv/bin/python bench/faults.py [--noise-bytes 200000] [--keep DIR]`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from common import Devices, display_section, machine, ms, percentile, print_figures

from simulators.mosquitto import free_port
from simulators.tables import TableProcess

TABLE = "PG-FLT"


def _journal_bytes(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


def _count(path: Path, sql: str) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return int(conn.execute(sql).fetchone()[0])


async def _state_times(url: str, stop: asyncio.Event, every: float = 0.02) -> list[float]:
    """/api/state asked every ``every`` s until ``stop``: the answer times (seconds)."""
    times: list[float] = []
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            start = time.perf_counter()
            async with session.get(f"{url}/api/state") as response:
                await response.read()
            times.append(time.perf_counter() - start)
            await asyncio.sleep(every)
    return times


async def _deal(devices: Devices, journal: Path, settled_before: int, timeout: float = 20) -> str:
    await devices.rng.press()
    plan = await devices.shuffler.deal()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _count(journal, "SELECT count(*) FROM rounds WHERE status != 'open'") > settled_before:
            return plan.shuffle_id
        await asyncio.sleep(0.05)
    raise TimeoutError("the deal did not close")


async def noise(workdir: Path, size: int) -> dict[str, Any]:
    port = free_port()
    table = TableProcess(TABLE, workdir, extra=display_section(port))
    url = f"http://127.0.0.1:{port}"
    devices = Devices.make(workdir, seed=61)
    await devices.open()
    try:
        await table.start()
        await devices.wait_greeted((0, 0))
        journal = table.journal_path
        log = workdir / "daemon.log"
        # The baseline: one quiet round, and the page while idle.
        bytes0, rows0 = _journal_bytes(journal), _count(journal, "SELECT count(*) FROM events")
        await _deal(devices, journal, 0)
        round_bytes = _journal_bytes(journal) - bytes0
        round_rows = _count(journal, "SELECT count(*) FROM events") - rows0
        stop = asyncio.Event()
        idle_task = asyncio.create_task(_state_times(url, stop))
        await asyncio.sleep(2.0)
        stop.set()
        idle = await idle_task
        # The noise, with the page asked all along.
        bytes1, rows1 = _journal_bytes(journal), _count(journal, "SELECT count(*) FROM events")
        log1 = log.stat().st_size
        alarms1 = _count(journal, "SELECT count(*) FROM events WHERE kind = 'alarm'")
        stop = asyncio.Event()
        noisy_task = asyncio.create_task(_state_times(url, stop))
        data = b"\x02\xff" * (size // 2)
        started = time.perf_counter()
        for i in range(0, len(data), 4096):
            await devices.shuffler.port.write(data[i : i + 4096])
        written = time.perf_counter() - started
        # The next deal: its frames come after the noise, so it settles once all was read.
        await _deal(devices, journal, 1)
        settled_after = time.perf_counter() - started
        stop.set()
        noisy = await noisy_task
        figures = {
            "noise_bytes": len(data),
            "noise_written_s": round(written, 3),
            "next_round_closed_s": round(settled_after, 3),
            "round_journal_bytes": round_bytes,
            "round_journal_rows": round_rows,
            "noise_journal_bytes": _journal_bytes(journal) - bytes1 - round_bytes,
            "noise_journal_rows": _count(journal, "SELECT count(*) FROM events")
            - rows1
            - round_rows,
            "noise_alarms": _count(journal, "SELECT count(*) FROM events WHERE kind = 'alarm'")
            - alarms1,
            "noise_log_bytes": log.stat().st_size - log1,
            "page_idle_p50_ms": ms(percentile(idle, 50)),
            "page_noise_p50_ms": ms(percentile(noisy, 50)),
            "page_noise_p99_ms": ms(percentile(noisy, 99)),
            "page_noise_max_ms": ms(max(noisy)),
            "page_answers_during_noise": len(noisy),
        }
        figures["page_noise_vs_idle_p50"] = round(
            figures["page_noise_p50_ms"] / max(figures["page_idle_p50_ms"], 0.001), 2
        )
        return figures
    finally:
        await table.stop()
        table.close()
        await devices.close()


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


async def disk(workdir: Path) -> dict[str, Any]:
    small = workdir / "small-disk"
    if not _tmpfs(small, "4m"):
        return {"disk": "not run: mounting a tmpfs needs root"}
    port = free_port()
    journal = small / "journal.sqlite3"
    table = TableProcess(TABLE, workdir, extra=display_section(port))
    table.write_config()
    text = table.config_path.read_text().replace(str(table.journal_path), str(journal))
    text = text.replace('synchronous = "FULL"\n', 'synchronous = "FULL"\nmin_free_mb = 1\n')
    table.config_path.write_text(text)
    devices = Devices.make(workdir, seed=67)
    await devices.open()
    url = f"http://127.0.0.1:{port}"
    try:
        await table.start()
        pid = table.pid
        await devices.wait_greeted((0, 0))
        dealt: list[str] = []
        for n in range(3):
            dealt.append(await _deal(devices, journal, n))
        filler = small / "filler"
        free = os.statvfs(small).f_bavail * os.statvfs(small).f_frsize
        with open(filler, "wb") as f, contextlib.suppress(OSError):
            f.write(b"\0" * free)
        states: list[str] = []
        async with aiohttp.ClientSession() as session:
            for _ in range(5):
                await devices.rng.press()
                dealt.append((await devices.shuffler.deal()).shuffle_id)
                await asyncio.sleep(0.5)
                async with session.get(f"{url}/api/state") as response:
                    body = await response.json()
                    states.append(str(body.get("status", {}).get("state")))
            filler.unlink()
            recovered_at = time.perf_counter()
            while True:
                async with session.get(f"{url}/api/state") as response:
                    body = await response.json()
                if body.get("status", {}).get("state") == "online":
                    break
                await asyncio.sleep(0.1)
            recovery_s = time.perf_counter() - recovered_at
        recovered_same_process = table.pid == pid and table.alive
        closed = _count(journal, "SELECT count(*) FROM rounds WHERE status != 'open'")
        for _ in range(3):
            dealt.append(await _deal(devices, journal, closed))
            closed = _count(journal, "SELECT count(*) FROM rounds WHERE status != 'open'")
        with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT status, reason, result FROM rounds").fetchall()
        # Stopped and started again on a full disk: one line, status 73, no restart loop.
        await table.stop()
        with open(filler, "wb") as f, contextlib.suppress(OSError):
            f.write(b"\0" * os.statvfs(small).f_bavail * os.statvfs(small).f_frsize)
        started = subprocess.run(
            [sys.executable, "-m", "controller.cli", "run", "--config", str(table.config_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        refusal = [line for line in started.stderr.splitlines() if not line.startswith("{")]
        ids = {json.loads(r[2]).get("shuffle_id") for r in rows if r[2]}
        return {
            "disk_deals": len(dealt),
            "disk_deals_on_file": sum(s in ids for s in dealt),
            "disk_rounds": {
                status: sum(r[0] == status for r in rows) for status in {r[0] for r in rows}
            },
            "disk_journal_fault_voids": sum(r[1] == "journal_fault" for r in rows),
            "disk_unexplained": sum(r[0] != "settled" and not r[1] for r in rows),
            "disk_states_seen_while_full": sorted(set(states)),
            "disk_recovery_s": round(recovery_s, 2),
            "disk_same_process": recovered_same_process,
            "disk_start_when_full_status": started.returncode,
            "disk_start_when_full_line": refusal[-1] if refusal else "",
        }
    finally:
        await table.stop()
        table.close()
        await devices.close()
        subprocess.run(["umount", str(small)], check=False)


async def bench(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    print("line noise …", file=sys.stderr, flush=True)
    figures: dict[str, Any] = {"machine": machine()}
    (workdir / "noise").mkdir(parents=True, exist_ok=True)
    (workdir / "disk").mkdir(parents=True, exist_ok=True)
    figures.update(await noise(workdir / "noise", args.noise_bytes))
    print("a full disk …", file=sys.stderr, flush=True)
    figures.update(await disk(workdir / "disk"))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--noise-bytes", type=int, default=200_000)
    parser.add_argument("--keep", help="work in this directory and keep it")
    args = parser.parse_args()
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        figures = asyncio.run(bench(args, Path(args.keep)))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-faults-") as name:
            figures = asyncio.run(bench(args, Path(name)))
    print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
