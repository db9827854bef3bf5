"""Commands in: 1,000 malformed ones leave the daemon serving; each gets an error reply and a log
line. Consumers scale out with a shared subscription and together get every round once."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from collections import Counter
from pathlib import Path

import aiomqtt
import structlog

from controller.daemon import wait_for
from controller.mqtt.publisher import MqttService
from controller.mqtt.wire import COMMAND_SIZE_LIMIT
from simulators.mosquitto import Mosquitto
from tests.harness import running_table
from tests.mqtt.conftest import (
    PREFIX,
    WAIT,
    Subscriber,
    mqtt_section,
    on,
    status_is,
    validate_message,
)

MALFORMED: list[tuple[str, bytes, str]] = [
    ("status_request", b"{not json", "expected a JSON object"),
    ("open_table", b"\xff\xfe\x00garbage", "not UTF-8"),
    ("launch_missiles", b"{}", "unknown command"),
    ("status_request", b'{"pad": "' + b"a" * COMMAND_SIZE_LIMIT + b'"}', "too large"),
    ("open_table", b'{"kind": "void_round"}', "does not match"),
    ("enter_dice", b'{"dice": [7, 0, "x"], "request_id": "r-dice"}', "dice"),
    ("set_seats", b"[1, 2, 3]", "expected a JSON object"),
    ("void_round", b"[" * 8000 + b"]" * 8000, "expected a JSON object"),
    ("status_request", b'{"bogus": 1}', "bogus"),
    ("player_setting", b"null", "expected a JSON object"),
    ("set_wagers", b'{"seat": "1", "wagers": {"pai_gow": -5}}', "wagers.pai_gow"),
    ("player_setting", b'{"seat": "1", "front": ["As"]}', "front"),
    ("void_round", b'{"reason": "' + b"x" * 500 + b'"}', "reason"),
]


async def test_a_thousand_malformed_commands_leave_the_daemon_serving(
    broker: Mosquitto, tmp_path: Path
) -> None:
    service = MqttService()
    cases = list(itertools.islice(itertools.cycle(MALFORMED), 1000))
    # Each one validated on its own merits (the rate limit is tested in test_signed_commands).
    extra = mqtt_section(broker) + "\n[limits]\nmqtt_commands_per_minute = 60000\n"
    with structlog.testing.capture_logs() as events:
        async with (
            Subscriber(broker.port, [f"{PREFIX}reply/#", f"{PREFIX}round"]) as sub,
            running_table(tmp_path, services=[service], config_extra=extra) as t,
        ):
            await service.connected.wait()
            assert sub.client is not None
            replies = []
            for start in range(0, len(cases), 100):  # in batches, each answered before the next
                batch = cases[start : start + 100]
                for name, body, _ in batch:
                    await sub.client.publish(f"{PREFIX}cmd/{name}", body, qos=1)
                replies += await sub.take(100, lambda m: "/reply/" in m.topic)
            answered: Counter[tuple[str, str]] = Counter()
            for reply in replies:
                name = reply.topic.removeprefix(f"{PREFIX}reply/")
                assert reply.json["ok"] is False and reply.json["data"] is None
                assert len(reply.payload) < 2048  # an error never echoes an oversized body
                validate_message(reply)
                matches = [e for n, _, e in MALFORMED if n == name and e in reply.json["error"]]
                assert matches, reply.json
                answered[(name, matches[0])] += 1
            assert answered == Counter((name, expected) for name, _, expected in cases)
            assert any(r.json["request_id"] == "r-dice" for r in replies)
            assert service.refused == 1000 and service.commands == 0

            # Still serving: the next round settles and is published, a valid command answered.
            result = await t.deal()
            assert result.status == "settled"
            got = await sub.until(on(f"{PREFIX}round"))
            assert got.json["payload"]["round_id"] == result.round_id
            await sub.client.publish(
                f"{PREFIX}cmd/status_request",
                json.dumps({"kind": "status_request", "request_id": "ok-1"}),
                qos=1,
            )
            reply = await sub.until(on(f"{PREFIX}reply/status_request"))
            assert reply.json["ok"] and reply.json["request_id"] == "ok-1"
            assert reply.json["data"]["state"] == "online"
            assert service.connects == 1  # the link never dropped
    refused = [e for e in events if e["event"] == "command_refused"]
    assert len(refused) == 1000 and all(e["log_level"] == "warning" for e in refused)


async def test_two_shared_subscription_consumers_get_every_round_once(
    broker: Mosquitto, tmp_path: Path
) -> None:
    shared = "$share/cms/casino/+/paigow/+/round"
    arrived = asyncio.Event()
    first = Subscriber(broker.port, [shared], arrived=arrived)
    second = Subscriber(broker.port, [shared], aiomqtt.ProtocolVersion.V5, arrived=arrived)
    async with (
        first,
        second,
        Subscriber(broker.port, [f"{PREFIX}status"]) as watcher,
        running_table(tmp_path, services=[MqttService()], config_extra=mqtt_section(broker)) as t,
    ):
        await watcher.until(status_is("online"))
        results = [await t.deal() for _ in range(12)]
        settled = [r.round_id for r in results if r.status == "settled"]

        def all_arrived() -> bool:
            return len(first.received) + len(second.received) >= len(settled)

        await asyncio.wait_for(wait_for(all_arrived, arrived), WAIT)
    ids = {
        name: [m.json["payload"]["round_id"] for m in sub.received]
        for name, sub in (("first", first), ("second", second))
    }
    assert ids["first"] and ids["second"]  # both consumers took a share
    assert not set(ids["first"]) & set(ids["second"])  # nobody got a round twice
    assert sorted(ids["first"] + ids["second"]) == sorted(settled)
    order = {round_id: n for n, round_id in enumerate(settled)}
    for name in ("first", "second"):  # each consumer sees its share in order
        assert [order[i] for i in ids[name]] == sorted(order[i] for i in ids[name])


async def test_a_30_mb_command_never_reaches_the_table_over_mqtt_5(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """The table tells the broker (MQTT 5 Maximum Packet Size) not to send it anything bigger
    than a command may be, so a huge publish is dropped by the broker, not read into memory."""
    service = MqttService()
    extra = mqtt_section(broker, protocol="5")
    async with (
        Subscriber(broker.port, [f"{PREFIX}reply/#"], aiomqtt.ProtocolVersion.V5) as sub,
        running_table(tmp_path, services=[service], config_extra=extra),
    ):
        await service.connected.wait()
        assert sub.client is not None
        await sub.client.publish(f"{PREFIX}cmd/status_request", b"x" * 30_000_000, qos=1)
        await sub.client.publish(
            f"{PREFIX}cmd/status_request", b'{"request_id": "after-the-big-one"}', qos=1
        )
        reply = await sub.until(on(f"{PREFIX}reply/status_request"))
        assert reply.json["request_id"] == "after-the-big-one" and reply.json["ok"]
        assert service.commands == 1 and service.refused == 0  # the big one never arrived


async def test_a_command_is_journaled_with_its_channel_and_outcome(
    broker: Mosquitto, tmp_path: Path
) -> None:
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}reply/#"]) as sub,
        running_table(tmp_path, services=[service], config_extra=mqtt_section(broker)),
    ):
        await service.connected.wait()
        assert sub.client is not None
        await sub.client.publish(f"{PREFIX}cmd/void_round", b'{"request_id": "v-1"}', qos=1)
        reply = await sub.until(on(f"{PREFIX}reply/void_round"))
        assert reply.json["ok"] is False  # no round to void yet
    with sqlite3.connect(tmp_path / "journal.sqlite3") as conn:
        [(payload,)] = conn.execute(
            "SELECT payload FROM events WHERE kind = 'command.void_round'"
        ).fetchall()
    record = json.loads(payload)
    assert record["request_id"] == "v-1"
    assert record["origin"] == {"channel": "mqtt", "identity": f"{PREFIX}cmd/void_round"}
    assert record["outcome"]["ok"] is False and "no round" in record["outcome"]["error"]
