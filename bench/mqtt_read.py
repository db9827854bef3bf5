"""The pit's MQTT reading alone (issues 31, 41): CPU a message of draining a queued session from
Mosquitto through the pit's own client (``pit.broker.Session``: paho's public API driven by the
pit's asyncio loop, manual acknowledgements, what has arrived taken at once), on MQTT 5 and
MQTT 3.1.1, with Nagle's algorithm on (the pit's subscriber) and off, beside paho's own
threaded loop reading the same (``loop_start``, a PUBACK a message as ``ack`` sends it) as the
same run's baseline.

A publisher process queues ``--messages`` QoS 1 messages of ``--bytes`` for the session while it
is away (on topics of 2,000 tables); the reader connects and drains them in batches as
``Ingest._receive`` does, acknowledging each batch. Best of ``--repeat`` drains. The last line
is one JSON object; ``ratio_*`` are against paho's own loop on MQTT 5 in this run.

Run: `.venv/bin/python bench/mqtt_read.py` (about a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pit.broker import Link, Session
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


def link(port: int, protocol: str, name: str, nodelay: bool) -> Link:
    return Link("127.0.0.1", port, f"bench-pit-{name}", protocol=protocol, persistent=True,
                session_expiry=3600, receive_maximum=800, nodelay=nodelay)  # fmt: skip


def publish(port: int, n: int, size: int) -> None:
    subprocess.run([sys.executable, "-c", PUBLISH, str(port), str(n), str(size)], check=True)


async def drain(port: int, protocol: str, name: str, n: int, size: int, nodelay: bool) -> float:
    """CPU seconds of the pit's Session draining ``n`` queued messages."""
    async with Session(link(port, protocol, name, nodelay), manual_ack=True) as s:
        await s.subscribe("bench/#", timeout=30)  # the session, subscribed, then away
    publish(port, n, size)
    got = 0
    never = asyncio.get_running_loop().create_future()
    async with Session(link(port, protocol, name, nodelay), manual_ack=True) as s:
        start = time.process_time()
        while got < n:
            await s.arrived(never)
            batch = s.take(200)  # as Ingest._receive takes what has arrived
            got += len(batch)
            assert got <= n, "more than was published: another session's"
            s.acknowledge(batch)
        cpu = time.process_time() - start
        await asyncio.sleep(0.2)  # the last PUBACKs out before the disconnect
    return cpu


def drain_paho(port: int, protocol: str, name: str, n: int, size: int) -> float:
    """CPU seconds of paho's own network thread reading ``n`` queued messages, a PUBACK each."""
    v5 = protocol == "5"

    def make() -> paho.Client:
        c = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"bench-paho-{name}",
                        protocol=paho.MQTTv5 if v5 else paho.MQTTv311,
                        clean_session=None if v5 else False, manual_ack=True)  # fmt: skip
        return c

    def connect(c: paho.Client) -> None:
        props = None
        if v5:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = 3600
            props.ReceiveMaximum = 800
        c.connect("127.0.0.1", port, clean_start=False, properties=props)

    c = make()
    subscribed = threading.Event()
    c.on_subscribe = lambda *a: subscribed.set()
    connect(c)
    c.loop_start()
    c.subscribe("bench/#", qos=1)
    subscribed.wait(30)
    c.disconnect()
    c.loop_stop()
    publish(port, n, size)
    done = threading.Event()
    count = [0]

    def on_message(client: paho.Client, userdata: Any, m: paho.MQTTMessage) -> None:
        client.ack(m.mid, m.qos)
        count[0] += 1
        if count[0] >= n:
            done.set()

    c = make()
    c.on_message = on_message
    start = time.process_time()
    connect(c)
    c.loop_start()
    done.wait(300)
    cpu = time.process_time() - start
    time.sleep(0.2)
    c.disconnect()
    c.loop_stop()
    return cpu


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="paigow-mqtt-read-"))
    queue = ["max_queued_messages 1000000", "max_inflight_messages 1000", "max_queued_bytes 0"]
    broker = Mosquitto(workdir, options=queue)
    await broker.start()
    variants = {  # protocol, Nagle's algorithm off (TCP_NODELAY) or on, paho's own loop
        "mqtt5_paho": ("5", True, True),
        "mqtt5_pit": ("5", False, False),
        "mqtt5_pit_nodelay": ("5", True, False),
        "mqtt311_pit": ("3.1.1", False, False),
    }
    best: dict[str, float] = {}
    try:
        for i in range(args.repeat):
            for name, (protocol, nodelay, own_loop) in variants.items():
                if own_loop:
                    cpu = drain_paho(broker.port, protocol, f"{name}-{i}", args.messages,
                                     args.bytes)  # fmt: skip
                else:
                    cpu = await drain(broker.port, protocol, f"{name}-{i}", args.messages,
                                      args.bytes, nodelay)  # fmt: skip
                best[name] = min(best.get(name, cpu), cpu)
                print(f"  pass {i + 1} {name:<18} {cpu / args.messages * 1000:.4f} ms a message",
                      flush=True)  # fmt: skip
    finally:
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
