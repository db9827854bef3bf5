"""`paigow-table monitor`: the feed's one-line summaries and the broker address, and the
command against a broker (text, and `--json` with only JSON on stdout)."""

from __future__ import annotations

import asyncio
import io
import json
import sys

from controller.cli import command_parser
from controller.mqtt.feed import format_feed_line, monitor, parse_broker
from simulators.mosquitto import Mosquitto
from tests.mqtt.conftest import PREFIX, Subscriber


def test_feed_lines() -> None:
    def env(schema: str, payload: dict[str, object], **extra: object) -> bytes:
        body = {"schema": schema, "version": 1, "seq": 12, "replayed": False, "payload": payload}
        return json.dumps({**body, **extra}).encode()

    status = env(
        "paigow.status",
        {"state": "online", "table_open": True, "devices": {"shuffler": True, "rng": False}},
    )
    line = format_feed_line(f"{PREFIX}status", status, prefix=PREFIX, retained=True)
    assert line.startswith("status ") and "#12" in line and "online" in line
    assert "shuffler+ rng-" in line and line.endswith("(retained)")
    dead = env(
        "paigow.round",
        {"round_seq": 4, "status": "dead", "reasons": [{"code": "short_packet"}]},
        replayed=True,
    )
    line = format_feed_line(f"{PREFIX}dead", dead, prefix=PREFIX)
    assert "round 4 dead: a packet was short" in line and line.endswith("(replayed)")
    alarm = env("paigow.alarm", {"severity": "critical", "code": "deck_integrity", "detail": "d"})
    assert "critical deck integrity: d" in format_feed_line(f"{PREFIX}alarm", alarm)
    reply = b'{"ok": false, "error": "unknown command", "request_id": "r1", "data": null}'
    assert "reply error: unknown command [r1]" in format_feed_line("x/reply/nope", reply)
    assert "not JSON" in format_feed_line("x", b"\xff")
    assert parse_broker("10.0.0.5:8883") == ("10.0.0.5", 8883)
    assert parse_broker("broker") == ("broker", 1883)
    assert parse_broker("[::1]:1884") == ("::1", 1884)


async def test_monitor_prints_the_feed(broker: Mosquitto) -> None:
    status = json.dumps(
        {
            "schema": "paigow.status",
            "version": 1,
            "seq": 3,
            "replayed": False,
            "payload": {"state": "offline", "table_open": True, "devices": {}},
        }
    )
    async with Subscriber(broker.port, []) as pub:
        assert pub.client is not None
        await pub.client.publish(f"{PREFIX}status", status, qos=1, retain=True)
    args = command_parser().parse_args(
        ["monitor", "--broker", f"127.0.0.1:{broker.port}", "--prefix", PREFIX, "--count", "1"]
    )
    out, err = io.StringIO(), io.StringIO()
    assert await monitor(args, out, err) == 0
    assert err.getvalue().startswith("# subscribed to")
    [line] = out.getvalue().splitlines()
    assert line.startswith("status ") and "offline" in line and "(retained)" in line


async def test_monitor_json_writes_only_json_on_stdout(broker: Mosquitto) -> None:
    """`paigow-table monitor --json | jq`: the real command, every stdout line one JSON object."""
    async with Subscriber(broker.port, []) as pub:
        assert pub.client is not None
        for n in range(3):
            body = json.dumps({"schema": "paigow.alarm", "version": 1, "seq": n, "payload": {}})
            await pub.client.publish(f"{PREFIX}alarm", body, qos=1, retain=n == 2)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "monitor",
        "--json",
        "--broker",
        f"127.0.0.1:{broker.port}",
        "--prefix",
        PREFIX,
        "--count",
        "1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0, stderr
    records = [json.loads(line) for line in stdout.decode().splitlines()]
    assert records and records[0]["topic"] == f"{PREFIX}alarm" and records[0]["retain"] is True
    assert b"# subscribed to" in stderr
