"""How long the journal's upkeep takes on a big journal (docs/journal.md): the start-up check
(integrity_check and quick_check), archiving every round into retention files, and salvage.

A journal of ``--rounds`` closed rounds (default 100,000: about 3 months of one busy table), each
with the rows a real round writes (a dozen events of a few hundred bytes and a result of a few
KB, the sizes of the demo's rounds), is built first, with progress. Figures are seconds and
rows or MB per second; the baseline in the same run is a plain sequential read of the file
(``cat``-like), which no check can beat.

Run: `.venv/bin/python bench/journal_maintenance.py [--rounds 100000]`
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import machine, print_figures

from controller.journal import Journal
from controller.journal.maintenance import archive_rounds, check_journal, salvage_journal

TABLE = "PG-BIG"
EVENTS = ("deal_started", *["packet_dealt"] * 7, "stub_verified", "deal_ended", "position_drawn")


def build(path: Path, rounds: int) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    result = json.dumps(
        {
            "seats": [{"seat": str(s), "cards": ["As"] * 7, "pad": "x" * 400} for s in range(6)],
            "dealer": {"cards": ["Kd"] * 7},
        }
    )
    event = json.dumps(
        {
            "device": "shuffler",
            "cards": ["Qh", "Jc", "Td", "9s", "8h", "7c", "6d"],
            "pad": "y" * 120,
        }
    )
    Journal(path, TABLE).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    event_id = 0
    for n in range(1, rounds + 1):
        at = (start + timedelta(minutes=n)).isoformat().replace("+00:00", "Z")
        rid = f"{TABLE}-{n:08d}"
        conn.execute(
            "INSERT INTO rounds (round_id, table_id, seq, opened_at, closed_at, status, result) "
            "VALUES (?, ?, ?, ?, ?, 'settled', ?)",
            (rid, TABLE, n, at, at, result),
        )
        for kind in EVENTS:
            event_id += 1
            conn.execute(
                "INSERT INTO events (id, round_id, at, kind, payload) VALUES (?, ?, ?, ?, ?)",
                (event_id, rid, at, kind, event),
            )
        if n % 10_000 == 0:
            conn.execute("COMMIT")
            conn.execute("BEGIN")
            print(f"  built {n} rounds …", file=sys.stderr, flush=True)
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"round_seq/{TABLE}", str(rounds)))
    conn.execute("COMMIT")
    conn.close()


def timed(label: str, fn: Any) -> tuple[float, Any]:
    print(f"{label} …", file=sys.stderr, flush=True)
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-journal-") as name:
        work = Path(name)
        path = work / "journal.sqlite3"
        print(f"building a journal of {args.rounds} rounds …", file=sys.stderr, flush=True)
        build(path, args.rounds)
        mb = path.stat().st_size / 2**20
        read_s, _ = timed("reading the file", lambda: path.read_bytes())
        full_s, full = timed(
            "integrity_check", lambda: check_journal(path, full_check_max_bytes=2**40)
        )
        quick_s, quick = timed("quick_check", lambda: check_journal(path, full_check_max_bytes=0))
        assert full.ok and quick.ok, (full.summary(), quick.summary())
        salvage_s, report = timed(
            "salvage", lambda: salvage_journal(path, work / "salvaged.sqlite3")
        )

        def archive() -> Any:
            # Two days on, by the journal's clock: retention removes nothing younger than a day.
            later = datetime.now(UTC) + timedelta(days=2)
            with Journal.open(path, TABLE, clock=lambda: later) as j:
                return archive_rounds(
                    j, before=datetime(2100, 1, 1, tzinfo=UTC), directory=work / "archive"
                )

        archive_s, archived = timed("archive every round", archive)
        archive_mb = sum(p.stat().st_size for p in archived.files) / 2**20
        figures = {
            "machine": machine(),
            "rounds": args.rounds,
            "journal_mb": round(mb, 1),
            "read_file_s": round(read_s, 2),
            "integrity_check_s": round(full_s, 2),
            "quick_check_s": round(quick_s, 2),
            "integrity_check_vs_read": round(full_s / read_s, 1),
            "salvage_s": round(salvage_s, 1),
            "salvage_rows": sum(report.copied.values()),
            "archive_s": round(archive_s, 1),
            "archive_rounds": archived.rounds,
            "archive_files": len(archived.files),
            "archive_mb": round(archive_mb, 1),
            "archive_rounds_per_s": round(archived.rounds / archive_s),
        }
    print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
