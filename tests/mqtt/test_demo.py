"""`paigow-table demo` as a person runs it: Ctrl-C, --rounds with a drain, --journal."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from simulators.mosquitto import Mosquitto
from tests.mqtt.conftest import Subscriber

DEMO_PREFIX = "casino/demo/paigow/PG-DEMO/"


def _demo(*args: str, out: Path) -> subprocess.Popen[bytes]:
    """The demo as its own process group, as a terminal runs a foreground command."""
    with out.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "demo", "--http-port", "0", *args],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def _until_text(path: Path, text: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{text!r} not printed in time"
        await asyncio.sleep(0.05)


async def _exit_code(proc: subprocess.Popen[bytes], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the demo did not exit in time")
        await asyncio.sleep(0.05)
    return proc.returncode


async def test_ctrl_c_stops_the_demo_cleanly(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole foreground process group: no traceback, exit 0, a last line."""
    out = tmp_path / "out"
    proc = _demo("--interval", "0.2", "--seed", "5", "--mqtt-port", "0", out=out)
    try:
        await _until_text(out, "round    2")
        os.killpg(proc.pid, signal.SIGINT)
        assert await _exit_code(proc, 30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.read_text()
    assert "Traceback" not in text and "Exception" not in text, text
    lines = text.rstrip().splitlines()
    # The summary last; or, when the same Ctrl-C stopped the demo's broker before it had the
    # last round's message, the summary and then the note saying so.
    assert "rounds closed; journal:" in lines[-1] or (
        "rounds closed; journal:" in lines[-2] and "were not delivered" in lines[-1]
    ), text


async def test_rounds_wait_until_the_broker_has_every_message(
    broker: Mosquitto, tmp_path: Path
) -> None:
    journal = tmp_path / "kept.sqlite3"
    out = tmp_path / "out"
    async with Subscriber(broker.port, [f"{DEMO_PREFIX}#"]) as sub:
        proc = _demo(
            "--rounds",
            "4",
            "--interval",
            "0",
            "--seed",
            "6",
            "--broker",
            f"127.0.0.1:{broker.port}",
            "--journal",
            str(journal),
            out=out,
        )
        assert await _exit_code(proc, 60) == 0
        rounds = await sub.take(4, lambda m: m.topic == f"{DEMO_PREFIX}round")
    assert len({r.json["payload"]["round_id"] for r in rounds}) == 4
    assert "not delivered" not in out.read_text()
    with sqlite3.connect(journal) as conn:  # kept after the demo, its outbox empty
        assert conn.execute("SELECT count(*) FROM rounds").fetchone()[0] == 4
        assert conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0


async def test_a_broker_gone_mid_run_ends_the_drain_at_its_timeout(
    broker: Mosquitto, tmp_path: Path
) -> None:
    journal = tmp_path / "kept.sqlite3"
    out = tmp_path / "out"
    proc = _demo(
        "--rounds",
        "6",
        "--interval",
        "0.5",
        "--seed",
        "7",
        "--broker",
        f"127.0.0.1:{broker.port}",
        "--journal",
        str(journal),
        "--drain-timeout",
        "2",
        out=out,
    )
    try:
        await _until_text(out, "round    1")
        await broker.stop()
        started = time.monotonic()
        assert await _exit_code(proc, 60) == 0
        # Six rounds at 0.5 s apart, then at most the 2 s drain (and the stop) before exiting.
        assert time.monotonic() - started < 15
    finally:
        if proc.poll() is None:
            proc.kill()
    last = out.read_text().rstrip().splitlines()[-1]
    with sqlite3.connect(journal) as conn:
        waiting = conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
    assert waiting > 0
    assert last == (
        f"{waiting} messages were not delivered to the broker; they stay in the journal {journal}"
    )
