"""The pieces without a broker: schemas up to date, the replayed flag, command validation, the
feed's one-line summaries; and the command line (monitor, schemas, demo) against a broker."""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controller.cli import _registrars, build_parser
from controller.journal import OutboxRow
from controller.messages import EnterDice, VoidRound, parse_command
from controller.mqtt.feed import format_feed_line, monitor, parse_broker
from controller.mqtt.wire import (
    COMMAND_SIZE_LIMIT,
    CommandRefused,
    parse_command_message,
    wire_payload,
)
from controller.schemas import generate, stale, write
from simulators.demo import run_demo
from simulators.mosquitto import Mosquitto
from tests.mqtt.conftest import PREFIX, SCHEMAS, Subscriber


def test_committed_schemas_match_the_models() -> None:
    assert stale(SCHEMAS) == [], "run: paigow-table schemas --output docs/schemas"
    names = set(generate())
    assert {"paigow.round.v1.json", "paigow.status.v1.json", "reply.json"} <= names
    assert {f"command.{k}.json" for k in ("void_round", "enter_dice")} <= names


def test_schemas_command_writes_and_checks(tmp_path: Path) -> None:
    parser = build_parser(_registrars())
    args = parser.parse_args(["schemas", "--output", str(tmp_path)])
    assert args.func(args) == 0
    assert stale(tmp_path) == []
    (tmp_path / "paigow.alarm.v1.json").write_text("{}")
    (tmp_path / "old.json").write_text("{}")
    check = parser.parse_args(["schemas", "--output", str(tmp_path), "--check"])
    assert check.func(check) == 1
    assert stale(tmp_path) == ["old.json", "paigow.alarm.v1.json"]
    write(tmp_path)
    assert stale(tmp_path) == [] and not (tmp_path / "old.json").exists()


def _row(payload: dict[str, object], replay: bool) -> OutboxRow:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return OutboxRow("T-1", 7, "T", f"{PREFIX}round", data, 1, False, "now", 0, replay, None)


def test_a_replayed_row_changes_only_its_replayed_field() -> None:
    envelope = {
        "schema": "paigow.round",
        "version": 1,
        "msg_id": "PG-T1-01ABC",
        "table_id": "PG-T1",
        "seq": 7,
        "time": "2025-01-01T00:00:00.000Z",
        "replayed": False,
        "payload": {"detail": 'a “quote” and "replayed":false inside'},
    }
    live = _row(envelope, replay=False)
    assert wire_payload(live) is live.payload
    again = wire_payload(_row(envelope, replay=True))
    assert json.loads(again) == {**envelope, "replayed": True}
    assert again == live.payload.replace(
        b'"replayed":false,"payload"', b'"replayed":true,"payload"'
    )


def test_commands_are_validated_by_topic_and_body() -> None:
    def parse(topic: str, body: bytes) -> object:
        return parse_command_message(PREFIX, f"{PREFIX}{topic}", body)

    assert parse("cmd/status_request", b"") == parse_command({"kind": "status_request"})
    dice = parse("cmd/enter_dice", b'{"dice": [1, 2, 3]}')
    assert isinstance(dice, EnterDice) and dice.dice == (1, 2, 3)
    void = parse("cmd/void_round", b'{"kind": "void_round", "request_id": "r"}')
    assert isinstance(void, VoidRound) and void.request_id == "r" and void.round_id is None
    refusals = {
        ("cmd/open_table", b'{"kind": "close_table", "request_id": "x"}'): "does not match",
        ("cmd/nope", b"{}"): "unknown command",
        ("cmd/void_round/x", b"{}"): "not a command topic",
        ("cmd/status_request", b" " * (COMMAND_SIZE_LIMIT + 1)): "too large",
        ("cmd/enter_dice", b'{"dice": [1, 2], "request_id": "x"}'): "dice",
        ("cmd/set_seats", b'"seats"'): "expected a JSON object",
        ("cmd/status_request", b"\xc3\x28"): "not UTF-8",
        ("cmd/status_request", b"{" * 9000): "expected a JSON object",
    }
    for (topic, body), expected in refusals.items():
        with pytest.raises(CommandRefused) as caught:
            parse(topic, body)
        assert expected in caught.value.error, (topic, caught.value.error)
        if b'"request_id": "x"' in body:
            assert caught.value.request_id == "x"
    with pytest.raises(CommandRefused, match="not a command topic"):
        parse_command_message(PREFIX, "casino/demo/paigow/PG-T2/cmd/open_table", b"{}")


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
    args = build_parser(_registrars()).parse_args(
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


async def test_the_demo_publishes_and_prints_the_feed(tmp_path: Path) -> None:
    args = build_parser(_registrars()).parse_args(
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
    assert await run_demo(args, out) == 0
    text = out.getvalue()
    assert "MQTT: a private Mosquitto on 127.0.0.1:" in text
    feed = [line for line in text.splitlines() if line.startswith("  mqtt ▸ ")]
    rounds = [line for line in feed if " paigow.round " in line]
    assert len(rounds) == 2 and "round 1 " in rounds[0] and "round 2 " in rounds[1]
    assert any(" paigow.status " in line and "online" in line for line in feed)
    # The pages are announced at the port the server got (asked for any free port).
    assert re.search(r"dealer page http://127\.0\.0\.1:[1-9]\d*/dealer", text), text[:400]


async def test_a_swallowed_stop_is_raised_again() -> None:
    # Python 3.11's wait_for can swallow a cancel that arrives with the reply it awaited.
    from controller.mqtt.publisher import _raise_if_stopping

    @dataclass
    class Stopping:  # the one port it uses (controller/ports.py Lifecycle)
        stopping: asyncio.Event = field(default_factory=asyncio.Event)

    daemon = Stopping()
    reached: list[str] = []

    async def session() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            reached.append("swallowed")  # what the race inside wait_for does
        _raise_if_stopping(daemon)
        reached.append("went on")

    _raise_if_stopping(daemon)  # not stopping: nothing happens
    task = asyncio.create_task(session())
    await asyncio.sleep(0)
    daemon.stopping.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reached == ["swallowed"]


async def test_a_link_the_broker_drops_leaves_no_exception_behind(broker: Mosquitto) -> None:
    """The broker dies under a connected client: leaving the client must not leave an
    unretrieved exception for asyncio to log (with a traceback) when it is collected."""
    import gc

    from controller.mqtt.client import Client

    seen: list[object] = []
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context.get("message")))
    try:
        client = Client("127.0.0.1", broker.port)
        async with client:
            await broker.kill()
            async with asyncio.timeout(10):
                while not client._disconnected.done():
                    await asyncio.sleep(0.05)
        del client
        gc.collect()
        await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert seen == []
