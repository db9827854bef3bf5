"""The table's /metrics, /healthz and /readyz as Prometheus and a monitor read them: a real
daemon with its devices on ptys, MQTT to a real Mosquitto and the display serving; the text
parsed by Prometheus' own parser. Counters follow what happened (rounds by result, a refused
command, a device lost), histograms the commits and the acknowledgements, gauges the state at
the scrape; remote scrapes need the supervisor token; labels stay bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controller.display import DisplayService
from controller.metrics import TableMetrics
from controller.mqtt.publisher import MqttService
from controller.table import Refusal
from drivers.events import DeviceOffline, DeviceOnline
from simulators.mosquitto import Mosquitto
from tests.display.conftest import unavailable, write_secret
from tests.display.test_access import non_loopback_address
from tests.harness import running_table
from tests.mqtt.conftest import mqtt_section, outbox_empty

TOKEN = "metrics-token-0123456789abcdef"


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)  # polling a daemon's state, not timing it


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return found[(name, tuple(sorted(labels.items())))]


async def test_metrics_follow_rounds_refusals_devices_and_the_feed(
    broker: Mosquitto, tmp_path: Path
) -> None:
    mqtt = MqttService()
    metrics = TableMetrics(mqtt=mqtt)
    mqtt.metrics = metrics
    display = DisplayService(port=0, metrics=metrics)
    async with running_table(
        tmp_path, services=[mqtt, display], config_extra=mqtt_section(broker), seed=3
    ) as t:
        await display.wait_started()
        await mqtt.connected.wait()
        url = f"http://127.0.0.1:{display.port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/healthz") as r:
                assert r.status == 200 and (await r.json())["status"] == "ok"
            async with http.get(f"{url}/readyz") as r:
                assert r.status == 200, await r.text()
            for _ in range(3):
                await t.deal()
            await t.deal(faults="duplicate_card")
            t.daemon.refused(Refusal("display", "10.9.8.7", "void_round", "wrong_pin", "wrong"))
            t.daemon.refused(
                Refusal("mqtt", "x/cmd/nonsense", "nonsense-" + "x" * 40, "signature", "bad")
            )
            await outbox_empty(t.journal, mqtt)
            # Game protection observes each settled round after its commit, in a task of its
            # own: its panel and the scrape below must see the same three rounds.
            async with asyncio.timeout(30):
                while not _protection_counted(t.daemon.panel("protection"), 3):
                    await asyncio.sleep(0.05)

            async with http.get(f"{url}/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                found = samples(await r.text())
            assert value(found, "paigow_table_rounds_total", result="settled") == 3
            assert value(found, "paigow_table_rounds_total", result="misdeal") == 1
            assert value(found, "paigow_table_rounds_total", result="void") == 0
            alarms, commands = "paigow_table_alarms_total", "paigow_table_commands_total"
            assert value(found, alarms, code="deck_integrity", severity="critical") == 1
            assert value(found, commands, kind="void_round", outcome="wrong_pin") == 1
            # A kind nobody knows is "other": a topic is anyone's, a label must stay bounded.
            assert value(found, commands, kind="other", outcome="signature") == 1
            assert not [k for k in found if "nonsense" in str(k)]
            assert value(found, "paigow_table_round_commit_seconds_count") == 4
            assert value(found, "paigow_table_publish_seconds_count") >= 4 + 2  # rounds, devices
            assert value(found, "paigow_table_journal_commit_seconds_count", sync="durable") >= 4
            assert value(found, "paigow_table_outbox_messages") == 0
            assert value(found, "paigow_table_outbox_oldest_age_seconds") == 0
            assert value(found, "paigow_table_device_up", device="shuffler") == 1
            assert value(found, "paigow_table_mqtt_connected") == 1
            assert value(found, "paigow_table_fault") == 0
            assert value(found, "paigow_table_journal_bytes") > 0
            assert value(found, "paigow_table_journal_disk_free_bytes") > 0
            assert value(found, "paigow_table_latched_alarms_waiting") >= 1  # deck_integrity
            assert value(found, "paigow_table_latched_alarms", code="deck_integrity") == 1
            assert value(found, "paigow_table_latched_alarm_oldest_seconds") >= 0
            # Game protection's distance to each threshold, as its panel says.
            panel = t.daemon.panel("protection")
            assert panel is not None and panel["tests"]
            for test in panel["tests"]:
                ratio = value(found, "paigow_table_protection_threshold_ratio", test=test["name"])
                assert ratio == test["statistic"] / test["threshold"]
            info = [k for k in found if k[0] == "paigow_table_info"]
            assert info and ("table_id", "PG-T1") in info[0][1]
            assert value(found, "process_resident_memory_bytes") > 0
            # No label carries a round, an alarm id or an address.
            for _, labels in found:
                for _, v in labels:
                    assert "PG-T1-" not in v and "alarm-" not in v and "10.9.8.7" not in v

            # A device lost: counted, shown down, and the table is not ready (with the reason).
            t.daemon.put_nowait(DeviceOffline(device="rng", reason="unplugged"))
            await wait_until(lambda: not t.daemon.table.devices.get("rng", True))
            async with http.get(f"{url}/readyz") as r:
                assert r.status == 503
                assert "rng" in " ".join((await r.json())["reasons"])
            async with http.get(f"{url}/metrics") as r:
                found = samples(await r.text())
            assert value(found, "paigow_table_device_up", device="rng") == 0
            assert value(found, "paigow_table_device_disconnects_total", device="rng") == 1
            t.daemon.put_nowait(DeviceOnline(device="rng"))
            await wait_until(lambda: t.daemon.table.devices.get("rng", False))
            async with http.get(f"{url}/readyz") as r:
                assert r.status == 200


async def test_a_remote_scrape_needs_the_token(tmp_path: Path) -> None:
    address = non_loopback_address()
    if address is None:
        unavailable("this machine has no non-loopback address")
    token = write_secret(tmp_path / "supervisor.token", TOKEN)
    display = DisplayService(host="0.0.0.0", port=0)
    extra = f'[display]\nhost = "0.0.0.0"\nsupervisor_token_file = "{token}"\n'
    async with running_table(tmp_path / "run", services=[display], config_extra=extra) as t:
        await display.wait_started()
        await t.deal()
        remote = f"http://{address}:{display.port}"
        async with aiohttp.ClientSession() as http:
            for path in ("/metrics", "/readyz", "/healthz"):
                async with http.get(f"{remote}{path}") as r:
                    assert r.status == 401, path
                async with http.get(f"{remote}{path}", headers={"Authorization": "Bearer no"}) as r:
                    assert r.status == 403, path
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            async with http.get(f"{remote}/metrics", headers=bearer) as r:
                assert r.status == 200
                found = samples(await r.text())
            assert value(found, "paigow_table_rounds_total", result="settled") == 1
            # Made by the display itself when nobody gave it one: no publisher, no such gauge.
            assert not [k for k in found if k[0] == "paigow_table_mqtt_connected"]
            # A Host header naming another site is refused here too (DNS rebinding).
            async with http.get(
                f"http://127.0.0.1:{display.port}/metrics", headers={"Host": "evil.example"}
            ) as r:
                assert r.status == 403


def _protection_counted(panel: dict[str, Any] | None, rounds: int) -> bool:
    """Whether game protection's panel has counted ``rounds`` settled rounds (its card test
    counts every one)."""
    tests = {test["name"]: test for test in (panel or {}).get("tests", [])}
    return "card_packet" in tests and tests["card_packet"]["rounds"] >= rounds
