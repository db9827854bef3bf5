"""Disk syncs a round costs the daemon (issue 16: two a round, zero loss).

The daemon runs as a real process under ``strace -f -c -e trace=fsync,fdatasync`` with MQTT to a
Mosquitto of its own (every message acknowledged, so the acknowledgements' commits count too) and
its devices simulated on ptys; it deals ``--rounds`` rounds at a real shuffler's pace, stops
cleanly, and the syscall counts are divided by the rounds. The same-run baseline is the number of
journal transactions a round commits (counted from the journal: events, and the transactions
that carry no event), which is the fsync count when every commit is synced.

Run: `.venv/bin/python bench/fsyncs.py [--rounds 100]` (needs strace).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    Broker,
    Devices,
    display_section,
    machine,
    mqtt_section,
    print_figures,
)

from simulators.tables import TableProcess

TABLE = "PG-FSY"


def _strace_counts(text: str) -> dict[str, int]:
    counts = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1] in ("fsync", "fdatasync") and fields[3].isdigit():
            counts[fields[-1]] = int(fields[3])
    return counts


async def run(workdir: Path, rounds: int) -> dict[str, object]:
    async with Broker(workdir / "broker") as broker:
        table = TableProcess(
            TABLE,
            workdir,
            extra=mqtt_section(broker.port, initial=0.1, cap=1.0) + display_section(None),
        )
        config = table.write_config()
        trace = workdir / "strace.txt"
        devices = Devices.make(workdir, seed=83, interval=0.05)
        await devices.open()
        cmd = [
            "strace",
            "-f",
            "-c",
            "-o",
            str(trace),
            "-e",
            "trace=fsync,fdatasync",
            sys.executable,
            "-m",
            "controller.cli",
            "run",
            "--config",
            str(config),
        ]
        log = open(workdir / "daemon.log", "wb")  # noqa: SIM115 (the child holds it)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
        try:
            await devices.wait_greeted((0, 0), timeout=60)
            journal = table.journal_path
            for n in range(rounds):
                await devices.rng.press()
                await asyncio.sleep(0.1)
                await devices.shuffler.deal()
                deadline = time.monotonic() + 20
                while _closed(journal) <= n:
                    if time.monotonic() > deadline:
                        raise TimeoutError("a round did not close")
                    await asyncio.sleep(0.05)
                if (n + 1) % 20 == 0:
                    print(f"  {n + 1} rounds …", file=sys.stderr, flush=True)
            deadline = time.monotonic() + 30
            while _pending(journal) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            pending = _pending(journal)
        finally:
            # SIGTERM to the daemon itself (strace's child): a clean stop, as systemd's.
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            for child in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(child), 15)
            proc.wait(timeout=60)
            log.close()
            await devices.close()
        with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
            events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
            settled = conn.execute(
                "SELECT count(*) FROM rounds WHERE status = 'settled'"
            ).fetchone()[0]
    counts = _strace_counts(trace.read_text())
    syncs = sum(counts.values())
    return {
        "rounds": rounds,
        "rounds_settled": settled,
        "outbox_left": pending,
        "events_per_round": round(events / rounds, 2),
        "fsync_calls": counts.get("fsync", 0),
        "fdatasync_calls": counts.get("fdatasync", 0),
        "syncs_per_round": round(syncs / rounds, 2),
    }


def _closed(journal: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM rounds WHERE status != 'open'").fetchone()[0])


def _pending(journal: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM outbox").fetchone()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    if shutil.which("strace") is None:
        print("strace is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-fsyncs-") as name:
        figures = {"machine": machine(), **asyncio.run(run(Path(name), args.rounds))}
    print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
