"""TLS with client certificates, and a broker ACL that limits the table's user to its prefix;
the password comes from a file and is never logged."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
from pathlib import Path

import aiomqtt
import pytest
import structlog
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.daemon import wait_for
from controller.mqtt.publisher import MqttService
from controller.mqtt.session import Options, Session
from simulators.mosquitto import Mosquitto
from tests.harness import running_table
from tests.mqtt.conftest import (
    PREFIX,
    MakeBroker,
    Subscriber,
    make_certificates,
    mqtt_section,
    on,
    password_line,
    status_is,
    validate_message,
)


def _tls_context(certs: Path, *, client_cert: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    if client_cert:
        context.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    return context


async def test_tls_with_client_certificates(make_broker: MakeBroker, tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "certs")
    broker = await make_broker(
        listener_options=[
            f"cafile {certs / 'ca.crt'}",
            f"certfile {certs / 'server.crt'}",
            f"keyfile {certs / 'server.key'}",
            "require_certificate true",
        ]
    )
    extra = mqtt_section(
        broker,
        "[mqtt.tls]",
        f'ca_file = "{certs / "ca.crt"}"',
        f'cert_file = "{certs / "client.crt"}"',
        f'key_file = "{certs / "client.key"}"',
    )
    service = MqttService()
    tls = {"tls_context": _tls_context(certs, client_cert=True)}
    async with (
        Subscriber(broker.port, [f"{PREFIX}#"], client_kwargs=tls) as sub,
        running_table(tmp_path, services=[service], config_extra=extra) as t,
    ):
        await sub.until(status_is("online"))
        result = await t.deal()
        got = await sub.until(on(f"{PREFIX}round"))
        assert got.json["payload"]["round_id"] == result.round_id
        validate_message(got)
        assert service.connects == 1

    # Without a client certificate the broker refuses the connection.
    bare = aiomqtt.Client(
        "127.0.0.1", broker.port, tls_context=_tls_context(certs, client_cert=False), timeout=1
    )
    with pytest.raises(aiomqtt.MqttError):
        async with bare:
            pass
    assert any("peer did not return a certificate" in line for line in broker.log)
    # Nor may anyone talk plain MQTT to the TLS listener.
    with pytest.raises(aiomqtt.MqttError):
        async with aiomqtt.Client("127.0.0.1", broker.port, timeout=1):
            pass
    assert any("wrong version number" in line for line in broker.log)


def _docs_acl() -> str:
    """docs/mqtt.md §5's ACL file, as printed there, for this test's table (PG-T1 at site demo,
    user table-pg-t1): the file a casino copies is the file tested (issue 40)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "mqtt.md").read_text(encoding="utf-8")
    block = re.search(r"```conf\n(# /etc/mosquitto/acl.*?)```", text, re.S)
    assert block is not None, "docs/mqtt.md §5 has no ACL block"
    return (
        block.group(1)
        .replace("user PG-07", "user table-pg-t1")
        .replace("riverside", "demo")
        .replace("PG-07", "PG-T1")
    )


ACL = _docs_acl()


async def test_acl_limits_the_table_to_its_prefix_and_the_password_is_never_logged(
    make_broker: MakeBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "pw-9f3Kq-acl"
    auth = tmp_path / "auth"
    auth.mkdir()
    (auth / "passwords").write_text(
        password_line("table-pg-t1", secret) + password_line("cms", "cms-pw")
    )
    (auth / "acl").write_text(ACL)
    (auth / "table.password").write_text(secret + "\n")
    broker: Mosquitto = await make_broker(
        options=[
            f"password_file {auth / 'passwords'}",
            f"acl_file {auth / 'acl'}",
            "allow_anonymous false",
        ]
    )
    extra = mqtt_section(
        broker,
        'username = "table-pg-t1"',
        f'password_file = "{auth / "table.password"}"',
        'reply_prefixes = ["clients/cms/"]',  # allowed by the table; the broker's ACL decides
        protocol="5",  # a PUBACK then says when the ACL refuses a publish
    )
    cms = {"username": "cms", "password": "cms-pw"}
    service = MqttService()
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        async with (
            Subscriber(
                broker.port,
                [f"{PREFIX}#", "clients/cms/replies"],
                aiomqtt.ProtocolVersion.V5,
                client_kwargs=cms,
            ) as sub,
            running_table(tmp_path, services=[service], config_extra=extra) as t,
        ):
            await sub.until(status_is("online"))
            result = await t.deal()
            got = await sub.until(on(f"{PREFIX}round"))
            assert got.json["payload"]["round_id"] == result.round_id
            assert sub.client is not None

            # A response topic outside the prefix: the broker refuses the reply; the table
            # logs it and serves on.
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            props.ResponseTopic = "clients/cms/replies"
            await sub.client.publish(
                f"{PREFIX}cmd/status_request", b'{"request_id": "out"}', qos=1, properties=props
            )
            await sub.client.publish(f"{PREFIX}cmd/status_request", b'{"request_id": "in"}', qos=1)
            reply = await sub.until(on(f"{PREFIX}reply/status_request"))
            assert reply.json["request_id"] == "in" and reply.json["ok"]
            assert not any(m.topic == "clients/cms/replies" for m in sub.received)
            assert any(e["event"] == "command_reply_refused" for e in events)

            # The table's user, as such: it may write its prefix only, read its commands only.
            probe_options = Options(
                client_id="acl-probe", v5=True, username="table-pg-t1", password=secret
            )
            async with Session("127.0.0.1", broker.port, probe_options) as probe:
                own = await probe.publish_acked(f"{PREFIX}alarm", b"{}")
                other = await probe.publish_acked("casino/demo/paigow/PG-T2/round", b"{}")
                assert not own.is_failure and other.is_failure
                for topic in ("status", "device/shuffler", "reply/status_request"):
                    allowed = await probe.publish_acked(f"{PREFIX}{topic}", b"{}")
                    assert not allowed.is_failure, topic
                # Never a command, not even to itself (issue 40): that is the casino's to send.
                for topic in ("cmd/void_round", "cmd/resend", "cmd/x/y"):
                    forbidden = await probe.publish_acked(f"{PREFIX}{topic}", b"{}")
                    assert forbidden.is_failure, topic
                await probe.subscribe("casino/#", qos=1)
                await sub.client.publish("casino/demo/paigow/PG-T2/cmd/void_round", b"{}", qos=1)
                await sub.client.publish(f"{PREFIX}cmd/zz_probe", b"{}", qos=1)
                async with asyncio.timeout(10):
                    async for message in probe.messages():
                        topic = message.topic
                        assert topic.startswith(f"{PREFIX}cmd/"), topic
                        if topic == f"{PREFIX}cmd/zz_probe":
                            break
            result = await t.deal()
            got = await sub.until(lambda m: m.topic == f"{PREFIX}round" and m is not got)
            assert got.json["payload"]["round_id"] == result.round_id
            assert service.connects == 1

    # A wrong password: refused, retried, and neither password appears anywhere in the logs.
    (auth / "table.password").write_text("wrong-Pw-77\n")
    refused = MqttService()
    with structlog.testing.capture_logs() as failed:
        async with running_table(tmp_path / "wrong", services=[refused], config_extra=extra):
            await asyncio.wait_for(
                wait_for(lambda: refused.failures >= 2, refused.link_changed), 10
            )
    assert refused.connects == 0 and "Not authorized" in str(refused.last_error)
    assert any(e["event"] == "mqtt_connect_failed" for e in failed)
    logged = json.dumps([*events, *failed], default=str) + caplog.text
    assert secret not in logged and "wrong-Pw-77" not in logged


async def test_a_publish_the_acl_refuses_stays_in_the_outbox_and_in_order(
    make_broker: MakeBroker, tmp_path: Path
) -> None:
    """MQTT 5: a PUBACK with a failure code (here the ACL forbids ``alarm``) is not a delivery;
    the message stays first in the outbox, nothing overtakes it, and it goes once allowed."""
    auth = tmp_path / "auth"
    auth.mkdir()
    (auth / "passwords").write_text(
        password_line("table-pg-t1", "pw-t1") + password_line("cms", "cms-pw")
    )
    narrow = ACL.replace(
        "topic write casino/demo/paigow/PG-T1/+\n",
        "".join(
            f"topic write casino/demo/paigow/PG-T1/{t}\n"
            for t in ("status", "round", "dead", "player")
        ),
    )
    assert narrow != ACL
    (auth / "acl").write_text(narrow)
    (auth / "table.password").write_text("pw-t1\n")
    broker = await make_broker(
        options=[
            f"password_file {auth / 'passwords'}",
            f"acl_file {auth / 'acl'}",
            "allow_anonymous false",
        ]
    )
    extra = mqtt_section(
        broker,
        'username = "table-pg-t1"',
        f'password_file = "{auth / "table.password"}"',
        protocol="5",
    )
    service = MqttService()
    cms = {"username": "cms", "password": "cms-pw"}
    async with (
        Subscriber(broker.port, [f"{PREFIX}#"], client_kwargs=cms) as sub,
        running_table(tmp_path, services=[service], config_extra=extra) as t,
    ):
        await sub.until(status_is("online"))
        misdeal = await t.deal(faults="duplicate_card")  # an alarm and a misdeal
        settled = await t.deal()
        await asyncio.wait_for(wait_for(lambda: service.failures >= 2, service.link_changed), 10)
        head = t.journal.outbox.pending(1)[0]
        assert head.topic == f"{PREFIX}alarm" and head.attempts >= 1
        assert "refused" in str(service.last_error)
        assert not any(m.topic.endswith(("/alarm", "/dead", "/round")) for m in sub.received)

        (auth / "acl").write_text(ACL)
        broker.reload()
        alarm = await sub.until(on(f"{PREFIX}alarm"))
        dead = await sub.until(on(f"{PREFIX}dead"))
        good = await sub.until(on(f"{PREFIX}round"))
    assert alarm.json["msg_id"] == head.msg_id and alarm.json["replayed"] is True
    assert dead.json["payload"]["round_id"] == misdeal.round_id
    assert good.json["payload"]["round_id"] == settled.round_id
    assert alarm.json["seq"] < dead.json["seq"] < good.json["seq"]
