"""The table's fault state on MQTT (docs/faults.md): a journal that refuses writes is announced in
the retained status (which needs no disk), and its recovery as a journaled alarm."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from controller.mqtt.publisher import MqttService
from simulators.mosquitto import Mosquitto
from tests.harness import deal_until_fault, limit_pages, page_count, running_table
from tests.mqtt.conftest import PREFIX, Subscriber, mqtt_section


async def test_the_fault_goes_out_as_retained_status_and_the_recovery_as_an_alarm(
    tmp_path: Path, broker: Mosquitto
) -> None:
    extra = mqtt_section(broker)
    service = MqttService()
    async with running_table(tmp_path, services=[service], config_extra=extra, seed=43) as t:
        assert (await t.deal(rng_number=2)).status == "settled"
        # The broker goes away first, so no acknowledged message frees pages meanwhile (which
        # would let the table recover at once); it comes back while the table is in fault.
        await broker.stop()
        limit_pages(t.journal, page_count(t.journal))
        await deal_until_fault(t, [])
        service.connected.clear()
        await broker.start()
        await asyncio.wait_for(service.connected.wait(), 20)
        # A subscriber that connects now learns of it: the status is retained, and it is the
        # first thing the table published on reconnecting (it needs no disk).
        async with Subscriber(broker.port, [PREFIX + "status", PREFIX + "alarm"]) as sub:
            first = await sub.next()
            assert first.topic == PREFIX + "status" and first.retain
            body = json.loads(first.payload)["payload"]
            assert body["state"] == "fault" and body["fault"]["code"] == "journal_write_failed"
            assert "full" in body["fault"]["detail"]
            assert t.daemon.table.fault is not None
            limit_pages(t.journal, None)
            recovered = await sub.until(
                lambda m: (
                    m.topic == PREFIX + "alarm"
                    and json.loads(m.payload)["payload"]["code"] == "journal_fault"
                )
            )
            detail = json.loads(recovered.payload)["payload"]["detail"]
            assert "could not be written" in detail and "voided" in detail
            await sub.seen(
                lambda m: (
                    m.topic == PREFIX + "status"
                    and json.loads(m.payload)["payload"]["state"] == "online"
                )
            )
