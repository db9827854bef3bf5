"""The pit's MQTT reading alone (issue 31): CPU a message of draining a queued session from
Mosquitto through the pit's own client (``pit.ingest``: aiomqtt over paho, manual
acknowledgements, the batch's PUBACKs in one write), on MQTT 5 with paho's properties as paho
builds them, MQTT 5 with ``pit.paho_lean``'s properties, and with its read buffer too (what
the pit runs), and MQTT 3.1.1 without and with the buffer, in the same run.

A publisher process queues ``--messages`` QoS 1 messages of ``--bytes`` for the pit's persistent
session while it is away (on topics of 2,000 tables); the pit connects and drains them in
batches as ``Ingest._receive`` does, acknowledging each batch. Best of ``--repeat`` drains. The
last line is one JSON object; ``ratio_*`` are against paho's own MQTT 5 reading in this run.

Run: `.venv/bin/python bench/mqtt_read.py` (about a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomqtt
from paho.mqtt import _packet
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pit.ingest import _Client, acknowledge
from pit.paho_lean import LeanProperties
from pit.service import settle_collector
from simulators.mosquitto import Mosquitto

PUBLISH = """
import sys, paho.mqtt.client as m
port, n, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = m.Client(m.CallbackAPIVersion.VERSION2, client_id="bench-publisher")
c.max_inflight_messages_set(1000)
c.connect("127.0.0.1", port)
c.loop_start()
payload = b"x" * size
infos = [c.publish("bench/T%04d/round" % (i % 2000), payload, qos=1) for i in range(n)]
for info in infos:
    info.wait_for_publish(120)
c.loop_stop()
"""


def client(port: int, protocol: str, name: str) -> _Client:
    if protocol == "5":
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
        props.ReceiveMaximum = 800
        c = _Client("127.0.0.1", port, identifier=f"bench-pit-{name}",
                    protocol=aiomqtt.ProtocolVersion.V5, clean_start=False,
                    properties=props)  # fmt: skip
    else:
        c = _Client("127.0.0.1", port, identifier=f"bench-pit-{name}",
                    protocol=aiomqtt.ProtocolVersion.V311, clean_session=False)  # fmt: skip
    c._client.manual_ack_set(True)
    return c


async def drain(port: int, protocol: str, name: str, n: int, size: int) -> float:
    """CPU seconds of the pit's client draining ``n`` queued messages."""
    async with client(port, protocol, name) as c:  # the session, subscribed, then away
        await c.subscribe("bench/#", qos=1)
    subprocess.run([sys.executable, "-c", PUBLISH, str(port), str(n), str(size)], check=True)
    got = 0
    async with client(port, protocol, name) as c:
        await c.subscribe("bench/#", qos=1)
        messages = c.messages
        start = time.process_time()
        while got < n:
            batch = [await anext(messages)]
            batch += c.queued(199)  # as Ingest._receive takes what has arrived
            got += len(batch)
            assert got <= n, "more than was published: another session's"
            acknowledge(c, [(m.mid, m.qos) for m in batch])
        cpu = time.process_time() - start
        await asyncio.sleep(0.2)  # the last PUBACKs out before the disconnect
    return cpu


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="paigow-mqtt-read-"))
    queue = ["max_queued_messages 1000000", "max_inflight_messages 1000", "max_queued_bytes 0"]
    broker = Mosquitto(workdir, options=queue)
    await broker.start()
    variants = {  # protocol, paho's properties or the pit's, the pit's read buffer or not
        "mqtt5_paho": ("5", Properties, False),
        "mqtt5_lean": ("5", LeanProperties, False),
        "mqtt5_lean_buffered": ("5", LeanProperties, True),
        "mqtt311": ("3.1.1", Properties, False),
        "mqtt311_buffered": ("3.1.1", Properties, True),
    }
    best: dict[str, float] = {}
    try:
        for i in range(args.repeat):
            for name, (protocol, props, buffered) in variants.items():
                _packet.Properties = props  # type: ignore[attr-defined]
                _Client.read_buffer = buffered
                cpu = await drain(broker.port, protocol, f"{name}-{i}", args.messages, args.bytes)
                best[name] = min(best.get(name, cpu), cpu)
                print(f"  pass {i + 1} {name:<11} {cpu / args.messages * 1000:.4f} ms a message",
                      flush=True)  # fmt: skip
    finally:
        _packet.Properties = Properties  # type: ignore[attr-defined]
        await broker.stop()
    base = best["mqtt5_paho"]
    out: dict[str, Any] = {"messages": args.messages, "bytes": args.bytes, "gc": args.gc}
    for name, cpu in best.items():
        out[f"{name}_ms_per_message"] = round(cpu / args.messages * 1000, 4)
    for name in variants:
        if name != "mqtt5_paho":
            out[f"ratio_{name}"] = round(best[name] / base, 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--bytes", type=int, default=2_000, help="a feed message is about 2 KB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--gc",
        choices=["freeze", "default"],
        default="freeze",
        help="the collector frozen after the setup, as in the pit, or Python's default",
    )
    args = parser.parse_args()
    if args.gc == "freeze":  # as the pit does once it has started
        settle_collector()
    print(json.dumps(asyncio.run(run(args)), separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
