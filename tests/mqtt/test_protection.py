"""Game protection at a live table (docs/protection.md): a shuffler that riffles only once,
dealt through the real serial driver, is caught within a few rounds; the alarm goes out on its
own topic (schema-checked) and on ``alarm``, latched until a named person acknowledges it,
which restarts the test; the watch's state survives a restart."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from controller.messages import AcknowledgeAlarm
from controller.mqtt.publisher import MqttService
from simulators.mosquitto import Mosquitto
from tests.harness import running_table
from tests.mqtt.conftest import PREFIX, Subscriber, mqtt_section, on, validate_message


async def test_a_one_riffle_shuffler_is_caught_alarmed_and_acknowledged(
    broker: Mosquitto, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.sqlite3"
    extra = mqtt_section(broker)
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}protection", f"{PREFIX}alarm"]) as sub,
        running_table(
            tmp_path / "a",
            services=[service],
            config_extra=extra,
            journal_path=journal,
            bias="one_riffle",
        ) as t,
    ):
        await service.connected.wait()
        for n in range(4):
            await t.deal(rng_number=n + 1)
        found = await sub.until(on(f"{PREFIX}protection"))
        validate_message(found)
        p = found.json["payload"]
        assert p["test"] in ("rising_sequences", "pair_survival", "riffles")
        assert p["statistic"] >= p["threshold"] and 0 <= p["p_value"] < 1e-6
        assert "serviced" in p["advice"]
        alarm = await sub.seen(
            lambda m: m.topic == f"{PREFIX}alarm" and m.json["payload"]["alarm_id"] == p["alarm_id"]
        )
        validate_message(alarm)
        assert alarm.json["payload"]["code"] == "game_protection"
        assert alarm.json["payload"]["ack_required"]
        monitor = t.protection
        assert monitor is not None
        panel = {s["name"]: s for s in monitor.panel()["tests"]}
        assert panel[p["test"]]["alarmed_since"] is not None
        latched = {a.alarm_id for a in t.daemon.table.latched.values()}
        assert p["alarm_id"] in latched
        # Every dealt round observed first: the statistics wait for a quiet moment, and a
        # one-riffle deck observed after the acknowledgement alarms its fresh test at once.
        await t.service("protection").observed()
        reply = await t.daemon.submit(
            AcknowledgeAlarm(alarm_id=p["alarm_id"], by="Surveillance: J. Ortiz", note="swapped")
        )
        assert reply.ok, reply
        panel = {s["name"]: s for s in monitor.panel()["tests"]}
        assert panel[p["test"]]["alarmed_since"] is None  # the test starts afresh
        assert panel[p["test"]]["reset_at"] is not None
        await t.service("protection").observed()  # the statistics run after the publish
        seen = monitor.watch.rounds
    # After a restart the watch goes on where it was, the other alarm still latched.
    async with running_table(tmp_path / "b", journal_path=journal, seed=9) as t:
        monitor = t.protection
        assert monitor is not None and monitor.watch.rounds == seen
        assert p["alarm_id"] not in t.daemon.table.latched
        await t.deal(rng_number=2)
        await t.service("protection").observed()
        assert monitor.watch.rounds == seen + 1
    with sqlite3.connect(journal) as conn:
        kinds = [k for (k,) in conn.execute("SELECT kind FROM events ORDER BY id")]
        [ack] = [
            json.loads(x)
            for (x,) in conn.execute("SELECT payload FROM events WHERE kind='alarm_acknowledged'")
        ]
    assert "protection_finding" in kinds and ack["code"] == "game_protection"
