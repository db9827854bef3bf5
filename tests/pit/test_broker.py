"""The pit's MQTT room (``pit.broker``, paho's public API alone) against real brokers: a real
Mosquitto on MQTT 5 and 3.1.1, and RabbitMQ's MQTT plugin (3.1.1; `make rabbitmq-mqtt`).

The contract the ingest relies on: a persistent session kept across connections; messages in
the order they were published, whole, however they were cut into reads; acknowledged only when
told (the broker sends the rest again on the next connect, and nothing acknowledged); a lost
link, a refused connection or a refused publish is a ``BrokerError``, never a silence."""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from dataclasses import replace
from pathlib import Path

import aiomqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from pit.broker import BrokerError, Link, Message, Session, publish_once
from simulators.mosquitto import Mosquitto, free_port
from tests.pit.conftest import publish

RABBIT_HOST, _, RABBIT_PORT = os.environ.get("PIT_RABBITMQ_MQTT", "127.0.0.1:1884").rpartition(":")


def _link(port: int, protocol: str, name: str, host: str = "127.0.0.1") -> Link:
    return Link(host, port, name, protocol=protocol, persistent=True, session_expiry=600,
                receive_maximum=20, nodelay=False)  # fmt: skip


async def _take(session: Session, n: int, timeout: float = 10.0) -> list[Message]:
    """``n`` messages as the ingest takes them: wait for one, take what has arrived."""
    got: list[Message] = []
    never = asyncio.get_running_loop().create_future()
    async with asyncio.timeout(timeout):
        while len(got) < n:
            assert await session.arrived(never)
            got += session.take(n - len(got))
    return got


async def _nothing_more(session: Session, wait: float = 1.0) -> None:
    never = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(session.arrived(never), wait)


async def _acknowledged_exactly(port: int, protocol: str, host: str = "127.0.0.1") -> None:
    """30 messages queued for a persistent session (at most 20 sent ahead unacknowledged); the
    reader acknowledges the first 20 as they come, reads the other 10 and goes away without
    acknowledging them: on its return the broker sends exactly those 10 again, and after they
    are acknowledged, nothing."""
    name = f"pit-acks-{uuid.uuid4().hex[:6]}"
    topic = f"t{uuid.uuid4().hex[:6]}"
    async with Session(_link(port, protocol, name, host), manual_ack=True) as s:
        await s.subscribe(f"{topic}/#", timeout=10)
    async with aiomqtt.Client(host, port) as client:
        for i in range(30):
            await client.publish(f"{topic}/{i}", str(i).encode(), qos=1)
    async with Session(_link(port, protocol, name, host), manual_ack=True) as s:
        assert s.session_present
        got: list[Message] = []
        while len(got) < 20:  # as many as the broker sends ahead (RabbitMQ: 10), acknowledged
            batch = await _take(s, 1)
            batch += s.take(20 - len(got) - 1)
            s.acknowledge(batch)
            got += batch
        got += await _take(s, 10)  # sent once those were acknowledged; these are not
        assert [m.payload for m in got] == [str(i).encode() for i in range(30)]
        assert [m.topic for m in got] == [f"{topic}/{i}" for i in range(30)]
        await asyncio.sleep(0.5)  # the acknowledgements reach the broker before the close
    async with Session(_link(port, protocol, name, host), manual_ack=True) as s:
        again = await _take(s, 10)
        assert [m.payload for m in again] == [str(i).encode() for i in range(20, 30)]
        s.acknowledge(again)
        await asyncio.sleep(0.3)
    async with Session(_link(port, protocol, name, host), manual_ack=True) as s:
        await _nothing_more(s)


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_acknowledged_exactly_what_was_told_mosquitto(tmp_path: Path, protocol: str) -> None:
    async with Mosquitto(tmp_path / "b", persistence=True) as broker:
        await _acknowledged_exactly(broker.port, protocol)


async def test_acknowledged_exactly_what_was_told_rabbitmq() -> None:
    """The same against RabbitMQ's MQTT plugin (a durable queue for the session)."""
    await _acknowledged_exactly(int(RABBIT_PORT), "3.1.1", RABBIT_HOST)


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_a_burst_comes_whole_and_in_order(tmp_path: Path, protocol: str) -> None:
    """600 messages of 0 bytes to 150 KB, queued for the session and drained at once (several
    packets in one read, packets across reads): every one whole and in order, none left to wait
    for another wake-up."""
    rng = random.Random(31)
    sizes = [rng.choice([0, 1, 2, 127, 128, 300, 2_000, 16_383, 16_384, 65_535, 150_000])
             for _ in range(600)]  # fmt: skip
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    options = ["max_queued_messages 10000", "max_inflight_messages 0", "max_queued_bytes 0"]
    async with Mosquitto(tmp_path / "b", persistence=True, options=options) as broker:
        link = Link("127.0.0.1", broker.port, "pit-burst", protocol=protocol, persistent=True,
                    session_expiry=600, receive_maximum=500)  # fmt: skip
        async with Session(link, manual_ack=True) as s:
            await s.subscribe("t/#", timeout=10)
        await publish(broker.port, [(f"t/{i % 7}", p) for i, p in enumerate(payloads)])
        async with Session(link, manual_ack=True) as s:
            got: list[Message] = []
            never = asyncio.get_running_loop().create_future()
            async with asyncio.timeout(30):
                while len(got) < len(payloads):
                    await s.arrived(never)
                    batch = s.take(500)
                    s.acknowledge(batch)
                    got += batch
            assert [bytes(m.payload) for m in got] == payloads
            assert s.received == len(payloads)


async def test_properties_are_read_as_the_publisher_set_them(tmp_path: Path) -> None:
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.UserProperty = ("shift", "night")
    props.ContentType = "application/json"
    v5 = aiomqtt.ProtocolVersion.V5
    async with Mosquitto(tmp_path / "b") as broker:
        reader = Session(Link("127.0.0.1", broker.port, "reader"), manual_ack=True)
        async with reader as s:
            await s.subscribe("t/#", timeout=10)
            async with aiomqtt.Client("127.0.0.1", broker.port, protocol=v5) as writer:
                await writer.publish("t/a", b"one", qos=1, properties=props)
                await writer.publish("t/b", b"two", qos=1)
            got = await _take(s, 2)
            s.acknowledge(got)
    assert [m.payload for m in got] == [b"one", b"two"]
    first = got[0].properties
    assert first is not None and first.json() == {  # type: ignore[no-untyped-call]
        "UserProperty": [("shift", "night")],
        "ContentType": "application/json",
    }


async def test_a_refused_connection_a_lost_link_and_a_refused_publish_are_errors(
    tmp_path: Path,
) -> None:
    # Nobody listening: an error within the timeout, not a hang.
    nobody = Link("127.0.0.1", free_port(), "pit-nobody", timeout=3)
    with pytest.raises(BrokerError, match="cannot connect"):
        async with Session(nobody):
            pass
    acl = tmp_path / "acl"
    acl.write_text("topic read #\ntopic write allowed/#\n")
    async with Mosquitto(tmp_path / "b", options=[f"acl_file {acl}"]) as broker:
        link = Link("127.0.0.1", broker.port, "pit-cmd")
        await publish_once(link, "allowed/cmd", b"{}")
        # MQTT 5: the broker says "not authorized" in the PUBACK: not taken for sent.
        with pytest.raises(BrokerError, match="refused"):
            await publish_once(link, "casino/demo/paigow/PG-01/cmd/x", b"{}")
        # A link lost while the reader waits: said at once, not a reader waiting for ever.
        async with Session(Link("127.0.0.1", broker.port, "pit-lost"), manual_ack=True) as s:
            await s.subscribe("t/#", timeout=10)
            never = asyncio.get_running_loop().create_future()
            waiting = asyncio.create_task(s.arrived(never))
            await asyncio.sleep(0.2)
            await broker.stop()
            with pytest.raises(BrokerError):
                await asyncio.wait_for(waiting, 10)


async def test_over_tls_with_a_client_certificate_every_packet_is_read(tmp_path: Path) -> None:
    """The pit's ``[broker]`` TLS files (CA, client certificate and key) through ``link``: the
    session connects to a listener that requires a certificate, and a burst of 400 small
    messages comes whole and in order through the TLS layer; a command's short connection too.
    Without the certificate the broker refuses. (The read loop's look at the TLS layer's own
    buffer, for a wake-up that ended on a packet that is not a message, is not forced here.)"""
    from pit.broker import link
    from tests.mqtt.conftest import make_certificates
    from tests.pit.conftest import make_config

    certs = make_certificates(tmp_path / "certs")
    listener = [f"cafile {certs / 'ca.crt'}", f"certfile {certs / 'server.crt'}",
                f"keyfile {certs / 'server.key'}", "require_certificate true"]  # fmt: skip
    async with Mosquitto(tmp_path / "b", listener_options=listener) as broker:
        config = make_config(
            broker.port, "sqlite:///unused", client_id="pit-tls", ca_file=str(certs / "ca.crt"),
            cert_file=str(certs / "client.crt"), key_file=str(certs / "client.key"),
        )  # fmt: skip
        async with Session(link(config, subscriber=True), manual_ack=True) as s:
            await s.subscribe("t/#", timeout=10)
            await publish_once(link(config, subscriber=False), "t/command", b"signed")
            got = await _take(s, 1)
            assert got[0].payload == b"signed"
            s.acknowledge(got)
            sender = Session(link(config, subscriber=False))
            async with sender:
                for i in range(400):
                    await sender.publish(f"t/{i}", str(i).encode(), qos=0)
            got = await _take(s, 400)
            assert [m.payload for m in got] == [str(i).encode() for i in range(400)]
        bare = replace(link(config, subscriber=False), tls=None, timeout=3)
        with pytest.raises(BrokerError):
            async with Session(bare):
                pass


def test_a_topic_that_is_not_utf8_is_a_reject_not_a_failure(db_url: str) -> None:
    """paho raises when a message's topic is not UTF-8; the pit takes it under a topic no table
    has, so it is a reject, acknowledged with its batch, and the session goes on (issue 30's
    rule: no message stops the pit)."""
    import time as clock

    from paho.mqtt.client import MQTTMessage

    from pit.broker import NOT_UTF8, topic_text
    from pit.store import Incoming, Store, migrate

    bad = MQTTMessage(mid=7, topic=b"casino/demo/paigow/\xff/round")
    good = MQTTMessage(mid=8, topic=b"casino/demo/paigow/PG-01/round")
    assert topic_text(bad) == NOT_UTF8 and topic_text(good) == "casino/demo/paigow/PG-01/round"
    migrate(db_url)
    store = Store(db_url, root="casino/demo/paigow/")
    try:
        out = store.ingest([Incoming(topic_text(bad), b"{}", False, clock.time())])
        assert out.rejected == 1 and out.stored == 0
    finally:
        store.close()
