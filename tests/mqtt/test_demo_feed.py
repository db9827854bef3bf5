"""`paigow-table demo` in process: it publishes its rounds and status on a private Mosquitto and
prints the feed and the pages' addresses."""

from __future__ import annotations

import io
import re
import signal
from pathlib import Path

from controller.cli import command_parser
from simulators.demo import run_demo


async def test_the_demo_publishes_and_prints_the_feed(tmp_path: Path) -> None:
    args = command_parser().parse_args(
        [
            "demo",
            "--rounds",
            "2",
            "--interval",
            "0",
            "--seed",
            "3",
            "--mqtt-port",
            "0",
            "--http-port",
            "0",
        ]
    )
    args.journal = str(tmp_path / "journal.sqlite3")
    out = io.StringIO()
    before = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)]
    assert await run_demo(args, out) == 0
    # The daemon ignores a second SIGTERM while it closes; the process goes on, and must not
    # keep ignoring it (a child inherits SIG_IGN: a process pool started later hung the suite).
    assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)] == before
    assert signal.SIG_IGN not in before
    text = out.getvalue()
    assert "MQTT: a private Mosquitto on 127.0.0.1:" in text
    feed = [line for line in text.splitlines() if line.startswith("  mqtt ▸ ")]
    rounds = [line for line in feed if " paigow.round " in line]
    assert len(rounds) == 2 and "round 1 " in rounds[0] and "round 2 " in rounds[1]
    assert any(" paigow.status " in line and "online" in line for line in feed)
    # The pages are announced at the port the server got (asked for any free port).
    assert re.search(r"dealer page http://127\.0\.0\.1:[1-9]\d*/dealer", text), text[:400]
