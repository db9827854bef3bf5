"""Nothing is lost: the broker down for 30 s while 20 rounds are dealt; the daemon killed with -9
while messages wait in its outbox. Every round reaches a subscriber, in order, without gaps,
marked as replayed, by the outbox (retain plays no part: rounds are not retained)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from controller.daemon import wait_for
from controller.journal import Journal
from controller.mqtt.publisher import MqttService
from simulators.demo import DEMO_CONFIG
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator
from tests.harness import running_table
from tests.mqtt.conftest import (
    PREFIX,
    Gate,
    Received,
    Subscriber,
    mqtt_section,
    outbox_empty,
    status_is,
    validate_message,
)

OUTAGE = 30.0


def is_round(m: Received) -> bool:
    return m.topic in (f"{PREFIX}round", f"{PREFIX}dead")


def is_sequenced(m: Received) -> bool:
    return m.topic.removeprefix(PREFIX).startswith(("round", "dead", "alarm", "player", "device/"))


async def test_broker_down_30_s_while_20_rounds_are_dealt(gated: Gate, tmp_path: Path) -> None:
    broker, service = gated.broker, MqttService()
    extra = mqtt_section(broker, *gated.mqtt_lines())
    async with running_table(tmp_path, services=[service], config_extra=extra, seed=20) as t:
        async with Subscriber(broker.port, [f"{PREFIX}#"], client_kwargs=gated.cms()) as before:
            await before.until(status_is("online"))
            warmup = await t.deal()
            live = await before.until(is_round)
            assert live.json["payload"]["round_id"] == warmup.round_id
            assert live.json["replayed"] is False
            await outbox_empty(t.journal, service)
        seq_before = t.journal.history.stats().message_seq

        await broker.stop()
        down_at = time.monotonic()
        results = [await t.deal() for _ in range(20)]
        assert len({r.round_id for r in results}) == 20
        pending = t.journal.history.stats().outbox_pending
        assert pending >= 20
        # The outage itself lasts 30 s (the scenario, not a synchronisation): the daemon keeps
        # retrying through it while the table deals on.
        await asyncio.sleep(max(0.0, OUTAGE - (time.monotonic() - down_at)))
        assert not service.connected.is_set()
        assert t.journal.history.stats().outbox_pending == pending

        # The same broker comes back on the same port, empty (persistence off). The subscriber
        # connects first: the table's user is admitted only once it is subscribed.
        gated.write(table_allowed=False)
        await broker.start()
        async with Subscriber(broker.port, [f"{PREFIX}#"], client_kwargs=gated.cms()) as sub:
            gated.open()
            online = await sub.until(status_is("online"))
            reconnected = time.monotonic()
            got = await sub.take(20, is_round, timeout=30)
            drained = time.monotonic() - reconnected
            last = t.journal.history.stats().message_seq
            if last > got[-1].json["seq"]:
                await sub.until(lambda m: is_sequenced(m) and m.json["seq"] == last)
        await outbox_empty(t.journal, service)

    assert online is sub.received[0]  # status first on the new connection
    assert [m.json["payload"]["round_id"] for m in got] == [r.round_id for r in results]
    feed = [m for m in sub.received if is_sequenced(m)]
    assert [m.json["seq"] for m in feed] == list(range(seq_before + 1, last + 1))
    assert all(m.json["replayed"] is True for m in feed)
    assert all(not m.retain for m in got)
    for m in sub.received:
        validate_message(m)
    assert service.connects == 2
    print(f"\n20 rounds after a {OUTAGE:.0f} s outage: delivered {drained:.3f} s after reconnect")


def _write_config(tmp: Path, gate: Gate) -> Path:
    text = DEMO_CONFIG.format(
        table="PG-T1", shuffler=tmp / "shuffler", rng=tmp / "rng", journal=tmp / "journal.sqlite3"
    )
    path = tmp / "table.toml"
    # The display is another service's business (and would want port 8080).
    path.write_text(
        text + mqtt_section(gate.broker, *gate.mqtt_lines()) + "\n[display]\nenabled = false\n"
    )
    return path


def _start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
            env={**os.environ},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def _devices_up(m: Received) -> bool:
    return status_is("online")(m) and m.json["payload"]["devices"] == {
        "shuffler": True,
        "rng": True,
    }


async def test_kill_9_with_messages_in_the_outbox_then_restart(gated: Gate, tmp_path: Path) -> None:
    broker = gated.broker
    config = _write_config(tmp_path, gated)
    log = tmp_path / "daemon.log"
    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=9)
    rng = RngSimulator(PtyPort(tmp_path / "rng"), seed=9)
    async with shuffler, rng:
        proc = _start(config, log)
        try:
            async with Subscriber(broker.port, [f"{PREFIX}#"], client_kwargs=gated.cms()) as sub:
                await sub.until(_devices_up)
                # kill -9 while connected: the broker publishes the last will.
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
                will = await sub.until(status_is("offline"))
                assert will.json["payload"]["devices"] == {}
                validate_message(will)
            async with Subscriber(broker.port, [f"{PREFIX}status"], client_kwargs=gated.cms()) as s:
                retained = await s.next()
                assert retained.retain and retained.json["payload"]["state"] == "offline"

            proc = _start(config, log)
            async with Subscriber(broker.port, [f"{PREFIX}#"], client_kwargs=gated.cms()) as sub:
                await sub.until(_devices_up)
            view = Journal.open(tmp_path / "journal.sqlite3", "PG-T1")
            updated = asyncio.Event()
            await asyncio.wait_for(
                wait_for(lambda: view.history.stats().outbox_pending == 0, updated), timeout=10
            )
            seq_before = view.history.stats().message_seq

            await broker.stop()
            for n in range(1, 6):
                await rng.press()
                await shuffler.deal()

                def settled(n: int = n) -> bool:
                    return view.history.stats().by_status.get("settled", 0) == n

                await asyncio.wait_for(wait_for(settled, updated), timeout=15)
            assert view.history.stats().outbox_pending >= 5
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            stranded = [(row.seq, row.msg_id) for row in view.outbox.pending(1000)]
            rounds = [r.round_id for r in reversed(view.history.recent_rounds(5))]

            gated.write(table_allowed=False)
            await broker.start()
            async with Subscriber(broker.port, [f"{PREFIX}#"], client_kwargs=gated.cms()) as sub:
                proc = _start(config, log)
                gated.open()
                online = await sub.until(status_is("online"))
                got = await sub.take(5, is_round, timeout=20)
                last_stranded = stranded[-1][0]
                await sub.until(lambda m: is_sequenced(m) and m.json["seq"] >= last_stranded)
            await asyncio.wait_for(
                wait_for(lambda: view.history.stats().outbox_pending == 0, updated), timeout=10
            )
            view.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0

    assert online is sub.received[0]
    assert [m.json["payload"]["round_id"] for m in got] == rounds
    feed = [m for m in sub.received if is_sequenced(m)]
    delivered = [(m.json["seq"], m.json["msg_id"]) for m in feed]
    assert delivered[: len(stranded)] == stranded  # the same ids, in order, none missing
    assert [s for s, _ in delivered] == list(range(seq_before + 1, seq_before + len(delivered) + 1))
    assert all(m.json["replayed"] for m in feed[: len(stranded)])
    for m in sub.received:
        validate_message(m)
    text = log.read_text(errors="replace")
    assert "mqtt_connect_failed" in text and gated.table_password not in text
