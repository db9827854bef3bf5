"""A real Prometheus (Debian's ``prometheus``, started here on a free port with the rules this
package ships) scraping a real table daemon (devices on ptys, MQTT to a real Mosquitto, the
display serving /metrics) and a real pit fed by it: after a few rounds, a device lost and a
table gone silent, its HTTP API returns the series, the rules are loaded and healthy, and the
alerts for the device and the silent table are pending or firing. The Prometheus graph of the
run is the screenshot docs/operations.md shows (PIT_SCREENS=docs/screens refreshes it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from playwright import async_api as playwright_api

from controller.display import DisplayService
from controller.metrics import TableMetrics
from controller.mqtt.publisher import MqttService
from drivers.events import DeviceOffline
from pit.config import parse_pit_config
from simulators.feed import SimTable, wire
from simulators.mosquitto import Mosquitto, free_port
from tests.harness import running_table
from tests.mqtt.conftest import mqtt_section
from tests.pit.conftest import KEY, feed_keys_file, publish
from tests.pit.test_page import SCREENS, RunningPit

PACKAGING = Path(__file__).resolve().parents[2] / "packaging"
RULES = PACKAGING / "prometheus" / "paigow.rules.yml"
DASHBOARD = PACKAGING / "grafana" / "paigow-floor.json"
WAIT = 60.0


@contextlib.asynccontextmanager
async def prometheus(workdir: Path, table: str, pit: str) -> AsyncIterator[str]:
    """Prometheus scraping ``table`` and ``pit`` (host:port) every second, the shipped rules
    evaluated every second; yields its base URL."""
    binary = shutil.which("prometheus")
    assert binary is not None, "Debian's prometheus package: make prometheus"
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        "scrape_configs:\n"
        f'  - job_name: paigow-table\n    static_configs:\n      - targets: ["{table}"]\n'
        f'  - job_name: paigow-pit\n    static_configs:\n      - targets: ["{pit}"]\n',
        encoding="utf-8",
    )
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=(workdir / "prometheus.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            await _until(lambda: _ok(http, f"{url}/-/ready"), "Prometheus never became ready")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _ok(http: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with http.get(url) as r:
            return r.status == 200
    except aiohttp.ClientError:
        return False


async def _until(check: Callable[[], Any], failure: str, timeout: float = WAIT) -> Any:
    """``await check()`` until it is truthy (polling a real Prometheus: it scrapes every
    second); its value."""
    try:
        async with asyncio.timeout(timeout):
            while not (result := await check()):
                await asyncio.sleep(0.25)
            return result
    except TimeoutError:
        raise AssertionError(failure) from None


async def _query(http: aiohttp.ClientSession, url: str, expr: str) -> list[dict[str, Any]]:
    async with http.get(f"{url}/api/v1/query", params={"query": expr}) as r:
        body = await r.json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


async def _value(http: aiohttp.ClientSession, url: str, expr: str) -> float | None:
    result = await _query(http, url, expr)
    return float(result[0]["value"][1]) if result else None


async def test_prometheus_scrapes_a_table_and_the_pit_and_the_rules_see_them(
    broker: Mosquitto, tmp_path: Path, browser: playwright_api.Browser
) -> None:
    keys = feed_keys_file(tmp_path / "feed-keys", ["PG-09"], {"PG-T1": tmp_path / "table"})
    config = parse_pit_config(
        f'[site]\nid = "demo"\n[broker]\nport = {broker.port}\nclient_id = "pit-prom"\n'
        f'[database]\nurl = "sqlite:///{tmp_path / "pit.sqlite3"}"\n'
        f'[record]\nfeed_keys_file = "{keys}"\n'
        '[web]\nhost = "127.0.0.1"\nport = 0\n'
        "[liveness]\nprobe_after = 1\nsilent_after = 2\nresend_after = 0\n"
    )
    mqtt = MqttService()
    metrics = TableMetrics(mqtt=mqtt)
    mqtt.metrics = metrics
    display = DisplayService(port=0, metrics=metrics)
    async with (
        running_table(
            tmp_path / "table", services=[mqtt, display], config_extra=mqtt_section(broker)
        ) as t,
        RunningPit(config) as pit,
    ):
        await display.wait_started()
        assert pit.web is not None
        pit_address = pit.web.url.removeprefix("http://")
        # A simulated table says it is online, then never again: silent after 2 s.
        topic, body = SimTable("PG-09", key=KEY, seed=9).status(datetime.now(UTC))
        await publish(broker.port, [(topic, wire(body))])
        async with (
            prometheus(tmp_path / "prometheus", f"127.0.0.1:{display.port}", pit_address) as url,
            aiohttp.ClientSession() as http,
        ):
            for _ in range(6):  # a round every 2 s: a few scrapes apart, for the picture
                await t.deal()
                await asyncio.sleep(2)
            t.daemon.put_nowait(DeviceOffline(device="rng", reason="unplugged"))

            await _until(
                lambda: _value(http, url, 'paigow_table_rounds_total{result="settled"}'),
                "Prometheus never had the table's settled rounds",
            )
            assert await _value(http, url, 'paigow_table_rounds_total{result="settled"}') == 6
            assert await _value(http, url, 'up{job="paigow-table"}') == 1
            assert await _value(http, url, 'up{job="paigow-pit"}') == 1
            await _until(
                lambda: _is(http, url, 'paigow_table_device_up{device="rng"}', 0.0),
                "the RNG box never showed down",
            )
            await _until(
                lambda: _is(http, url, 'paigow_pit_tables{state="silent"}', 1.0),
                "the pit never counted the silent table",
            )
            stored = await _until(
                lambda: _value(http, url, 'paigow_pit_messages_total{outcome="stored"}'),
                "the pit stored nothing",
            )
            assert stored >= 4  # the table's rounds, its status and devices, PG-09's status
            # The table said what its devices are (its config's identity, in the signed feed):
            # the pit keeps them in the table's device history (issue 44).
            detail = await pit.web.db(lambda s: s.pages.table_detail("PG-T1"))
            assert detail is not None
            shuffler = [d for d in detail["device_history"] if d["device"] == "shuffler"]
            assert [(d["model"], d["serial"]) for d in shuffler] == [("SIM-SHF", "SIM-PG-T1-S")]
            count = await _value(http, url, "paigow_table_publish_seconds_count")
            assert count is not None and count >= 6

            async with http.get(f"{url}/api/v1/rules") as r:
                groups = (await r.json())["data"]["groups"]
            rules = [rule for g in groups for rule in g["rules"]]
            assert {g["name"] for g in groups} == {"paigow-table", "paigow-pit"}
            assert all(rule["health"] == "ok" for rule in rules), [
                (rule["name"], rule.get("lastError")) for rule in rules if rule["health"] != "ok"
            ]
            alerts = await _until(
                lambda: _alerts(http, url, {"PaigowDeviceDown", "PaigowTableSilent"}),
                "the device and silent-table alerts never became pending",
            )
            assert {a["labels"].get("device") for a in alerts["PaigowDeviceDown"]} == {"rng"}

            # The floor's dashboard (packaging/grafana): every panel's query is valid PromQL
            # against this Prometheus, and all but the ones about trouble that did not happen
            # here (refusals, rejects, gaps) draw something.
            dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
            empty = []
            for panel in dashboard["panels"]:
                for target in panel["targets"]:
                    if not await _query(http, url, target["expr"]):
                        empty.append(panel["title"])
            assert set(empty) <= {
                "Commands refused a minute, by reason",
                "Pit: rejects a minute, by reason",
                "Game protection: statistic ÷ threshold (1 alarms)",
                "Pit: table's time → stored, p99; how far behind",
            }, empty

            # The picture for the docs: the run's rounds and messages in Prometheus' own graph.
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            expr = (
                'paigow_table_rounds_total{result="settled"} or '
                'paigow_pit_messages_total{outcome=~"stored|received"}'
            )
            await page.goto(
                f"{url}/classic/graph?g0.expr={quote(expr)}&g0.tab=0&g0.range_input=30s"
            )
            await page.locator(".graph_area svg, canvas").first.wait_for(timeout=20_000)
            SCREENS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(SCREENS / "prometheus-graph.png"), full_page=False)
            await context.close()


async def _is(http: aiohttp.ClientSession, url: str, expr: str, expected: float) -> bool:
    return await _value(http, url, expr) == expected


async def _alerts(
    http: aiohttp.ClientSession, url: str, names: set[str]
) -> dict[str, list[dict[str, Any]]] | None:
    async with http.get(f"{url}/api/v1/alerts") as r:
        alerts = (await r.json())["data"]["alerts"]
    found: dict[str, list[dict[str, Any]]] = {}
    for alert in alerts:
        if alert["state"] in ("pending", "firing"):
            found.setdefault(alert["labels"]["alertname"], []).append(alert)
    return found if names <= set(found) else None
