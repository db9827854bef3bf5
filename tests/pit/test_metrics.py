"""The pit's /metrics, /healthz and /readyz as Prometheus and a monitor read them: a real pit
(real Mosquitto, the pit's database both ways), simulated tables' signed feeds published to the
broker, a forged message and a made-up table's; the text parsed by Prometheus' own parser.
Health answers loopback without the token; metrics need it like every page; no label carries
a table id or anything a publisher wrote."""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp

from pit.config import parse_pit_config
from simulators.feed import SimTable, wire
from simulators.mosquitto import Mosquitto
from tests.display.conftest import unavailable
from tests.display.test_access import non_loopback_address
from tests.mqtt.test_metrics import Samples, samples, value
from tests.pit.conftest import KEY, publish
from tests.pit.test_page import RunningPit, _config, _secret


async def test_pit_metrics_count_what_it_stored_rejected_and_the_floor(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    token = secrets.token_urlsafe(24)
    token_file = _secret(tmp_path / "pit-token", token)
    command_key = _secret(tmp_path / "pit-command.key", secrets.token_hex(32))
    config = _config(tmp_path, broker.port, db_url, 0, token_file, command_key)
    sims = [SimTable(f"PG-0{i}", key=KEY, seed=i) for i in range(2, 5)]
    bearer = {"Authorization": f"Bearer {token}"}
    async with RunningPit(config) as pit:
        assert pit.web is not None
        url = pit.web.url
        now = datetime.now(UTC)
        feed = []
        for i, sim in enumerate(sims):
            feed.append(sim.status(now, state="offline" if i == 2 else "online"))
            for k in range(3, 0, -1):
                feed += sim.next_round(now - timedelta(seconds=6 * k))
        sent = [(t, wire(b)) for t, b in feed]
        # A forgery (another key's signature) and a table nobody registered.
        topic, body = sims[0].status(now)
        forged = wire(body).replace(b'"sig":{', b'"sig":{"x":1,', 1)
        stranger = SimTable("XX-99", key=KEY, seed=9)
        sent += [(topic, forged), *[(t, wire(b)) for t, b in [stranger.status(now)]]]
        await publish(broker.port, sent)

        async with aiohttp.ClientSession() as http:
            for path in ("/healthz", "/readyz"):  # loopback: no token needed
                async with http.get(f"{url}{path}") as r:
                    assert r.status == 200, (path, await r.text())
            async with http.get(f"{url}/metrics") as r:
                assert r.status == 401  # a page like any: the token
            found: Samples = {}
            for _ in range(200):  # until the pit has stored what was sent
                async with http.get(f"{url}/metrics", headers=bearer) as r:
                    assert r.status == 200
                    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                    found = samples(await r.text())
                if value(found, "paigow_pit_messages_total", outcome="received") >= len(sent):
                    break
                await asyncio.sleep(0.05)
            m = "paigow_pit_messages_total"
            assert value(found, m, outcome="received") == len(sent)
            stored = value(found, m, outcome="stored")
            rejected = value(found, m, outcome="rejected")
            assert rejected == 2 and stored >= len(feed) - 3  # (checkpoints may wait their turn)
            reasons = {k[1][0][1] for k in found if k[0] == "paigow_pit_rejects_total"}
            assert reasons and all(r.replace("_", "").isalnum() for r in reasons)
            assert sum(v for k, v in found.items() if k[0] == "paigow_pit_rejects_total") == 2
            assert value(found, "paigow_pit_tables", state="online") == 2
            assert value(found, "paigow_pit_tables", state="offline") == 1
            assert value(found, "paigow_pit_batch_messages_count") >= 1
            assert value(found, "paigow_pit_ingest_lag_seconds_count") >= 1
            assert value(found, "paigow_pit_database_call_seconds_count", role="page") >= 1
            assert value(found, "paigow_pit_broker_connected") == 1
            assert value(found, "paigow_pit_database_up") == 1
            assert value(found, "paigow_pit_gaps_open") == 0
            assert value(found, "process_resident_memory_bytes") > 0
            for _, labels in found:  # bounded: never a table, a topic or what a sender wrote
                for _, v in labels:
                    assert "PG-0" not in v and "XX-99" not in v and "casino/" not in v

        # The broker gone: not ready, and the reason says which link.
        await broker.stop()
        async with aiohttp.ClientSession() as http:
            for _ in range(100):
                async with http.get(f"{url}/readyz") as r:
                    if r.status == 503:
                        assert "broker" in " ".join((await r.json())["reasons"])
                        break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("/readyz stayed 200 with the broker down")
            async with http.get(f"{url}/healthz") as r:
                assert r.status == 200  # alive all the same
        await broker.start()


def test_reject_reasons_cannot_grow_the_labels_without_bound() -> None:
    """A flood's rejects name whatever a sender made up: a reason's label is its code only
    when it looks like one, and only the first MAX_REASONS codes get a label of their own."""
    from prometheus_client import generate_latest

    from pit.metrics import MAX_REASONS, PitMetrics
    from pit.store import Outcome

    metrics = PitMetrics()
    made_up = [(f"T{n}", f"code_{n}: from a sender") for n in range(200)]
    hostile = [("T", 'bad"sig\n{x="1"}: injected'), ("T", "a b c"), ("T", "Ünïcode: x")]
    outcome = Outcome(rejected=len(made_up) + len(hostile), rejects=made_up + hostile)
    metrics.batch(outcome, len(made_up) + len(hostile), 0.01, 0.0)
    found = samples(generate_latest(metrics.registry).decode())
    reasons = {dict(k[1])["reason"] for k in found if k[0] == "paigow_pit_rejects_total"}
    assert len(reasons) == MAX_REASONS + 1 and "other" in reasons
    assert sum(v for k, v in found.items() if k[0] == "paigow_pit_rejects_total") == 203
    assert not [r for r in reasons if '"' in r or "\n" in r or " " in r]


async def test_from_another_address_the_pits_probes_and_metrics_need_the_token(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """Health answers the pit's own computer without a token; from any other address the
    probes and the metrics are pages like any: 401 without the token (never the login page),
    403 with a wrong one, served with the right one."""
    address = non_loopback_address()
    if address is None:
        unavailable("this machine has no non-loopback address")
    token = secrets.token_urlsafe(24)
    token_file = _secret(tmp_path / "pit-token", token)
    config = parse_pit_config(
        f'[site]\nid = "demo"\n[broker]\nport = {broker.port}\nclient_id = "pit-remote"\n'
        f'[database]\nurl = "sqlite:///{tmp_path / "pit.sqlite3"}"\n'
        f'[web]\nhost = "0.0.0.0"\nport = 0\ntoken_file = "{token_file}"\n'
        f'allowed_hosts = ["{address}"]\n'
    )
    async with RunningPit(config) as pit:
        assert pit.web is not None
        port = int(pit.web.url.rsplit(":", 1)[1])
        remote, local = f"http://{address}:{port}", f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            for path in ("/healthz", "/readyz", "/metrics"):
                async with http.get(f"{remote}{path}", allow_redirects=False) as r:
                    assert r.status == 401, path
                async with http.get(f"{remote}{path}", headers={"Authorization": "Bearer x"}) as r:
                    assert r.status == 401, path  # a wrong token is no token
                bearer = {"Authorization": f"Bearer {token}"}
                async with http.get(f"{remote}{path}", headers=bearer) as r:
                    assert r.status == 200, path
            async with http.get(f"{local}/healthz") as r:
                assert r.status == 200
            async with http.get(f"{local}/metrics", allow_redirects=False) as r:
                assert r.status == 401  # loopback or not, the metrics are a page
