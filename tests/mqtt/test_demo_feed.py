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
    # Known handlers first: a suite started in the background (`make test &`) inherits SIGINT
    # ignored from its shell, which would hide what this checks.
    launched = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)]
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)]
        assert await run_demo(args, out) == 0
        # The daemon ignores a second SIGTERM while it closes; the process goes on, and must
        # not keep ignoring it (a child inherits SIG_IGN: a process pool started later hung the
        # suite).
        after = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)]
    finally:
        for sig, handler in zip((signal.SIGTERM, signal.SIGINT), launched, strict=True):
            signal.signal(sig, handler)
    assert after == before and signal.SIG_IGN not in after
    text = out.getvalue()
    assert "MQTT: a private Mosquitto on 127.0.0.1:" in text
    feed = [line for line in text.splitlines() if line.startswith("  mqtt ▸ ")]
    rounds = [line for line in feed if " paigow.round " in line]
    assert len(rounds) == 2 and "round 1 " in rounds[0] and "round 2 " in rounds[1]
    assert any(" paigow.status " in line and "online" in line for line in feed)
    # The pages are announced at the port the server got (asked for any free port).
    assert re.search(r"dealer page http://127\.0\.0\.1:[1-9]\d*/dealer", text), text[:400]
