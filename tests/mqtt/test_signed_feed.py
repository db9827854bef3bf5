"""The signed feed over a real Mosquitto (docs/mqtt.md "The signed feed"): every message the
table publishes — rounds, devices, alarms, checkpoints, the status online and offline, the
replies — verifies under the public key `paigow-table feed-key show` prints, and under no other.
And a person acknowledges, not a typed name: a correctly signed acknowledge_alarm naming a badge
that is not in the table's supervisors file is refused (journaled as a refusal) and the latched
alarm stays; one naming a supervisor is journaled with the key that signed it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.badges import hash_pin
from controller.clock import utc_now
from controller.feed_signature import FeedSignatureError, keyring, verify_signed
from controller.mqtt.publisher import MqttService
from controller.mqtt.signing import sign
from simulators.mosquitto import Mosquitto
from tests.harness import running_table
from tests.mqtt.conftest import PREFIX, Received, Subscriber, mqtt_section, on, validate_message

PIT = Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
CHECKPOINT_KEY = bytes(range(100, 132))


def _secret(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def _config(broker: Mosquitto, tmp_path: Path) -> str:
    pit = PIT.public_key().public_bytes_raw().hex()
    keys = _secret(tmp_path / "command-keys", f"pit-1 ed25519 {pit}\n")
    checkpoint = _secret(tmp_path / "checkpoint.key", CHECKPOINT_KEY.hex())
    supervisors = _secret(tmp_path / "supervisors", f"S1 {hash_pin('246810', iterations=10_000)}\n")
    return (
        mqtt_section(
            broker,
            f'command_keys_file = "{keys}"',
            f'checkpoint_key_file = "{checkpoint}"',
            "checkpoint_interval = 3600",
        )
        + f'\n[display]\nsupervisors_file = "{supervisors}"\n'
    )


def _signed(kind: str, request_id: str, **fields: Any) -> bytes:
    body = sign(
        PIT, "pit-1", kind, {**fields, "request_id": request_id}, utc_now(), table_id="PG-T1"
    )
    return json.dumps(body).encode()


def _registered(key_file: Path) -> dict[str, Any]:
    """The table's public key as the pit registers it: `paigow-table feed-key show`."""
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", "feed-key", "show", "--key-file", str(key_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    keys = keyring([lines["public_key"]])
    assert list(keys) == [lines["key_id"]]
    return keys


class _Pit:
    """The pit's side of one command: publish it signed, wait for its reply."""

    def __init__(self, sub: Subscriber) -> None:
        self.sub = sub

    async def send(self, kind: str, body: bytes) -> Received:
        assert self.sub.client is not None
        await self.sub.client.publish(f"{PREFIX}cmd/{kind}", body, qos=1)
        return await self.sub.until(on(f"{PREFIX}reply/{kind}"))


async def test_every_message_is_signed_and_a_typed_name_does_not_acknowledge(
    broker: Mosquitto, tmp_path: Path
) -> None:
    workdir = tmp_path / "table"
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}#"]) as sub,
        running_table(workdir, services=[service], config_extra=_config(broker, tmp_path)) as t,
    ):
        await service.connected.wait()
        pit = _Pit(sub)
        await t.deal(rng_number=3)
        await sub.until(on(f"{PREFIX}checkpoint"))
        for n in range(3):  # three forgeries: a latched command_refused alarm
            forged = sign(OTHER_KEY, "pit-1", "close_table", {"request_id": f"f-{n}"}, utc_now(),
                          table_id="PG-T1")  # fmt: skip
            reply = await pit.send("close_table", json.dumps(forged).encode())
            assert not reply.json["ok"]
        alarm = await sub.seen(on(f"{PREFIX}alarm"))  # perhaps before the last reply
        alarm_id = alarm.json["payload"]["alarm_id"]
        assert alarm.json["payload"]["ack_required"] is True

        # Signed by the pit's own key, naming someone who is no supervisor of this table.
        s100 = await pit.send(
            "acknowledge_alarm", _signed("acknowledge_alarm", "a-1", alarm_id=alarm_id, by="S100")
        )
        assert not s100.json["ok"] and "not a supervisor" in s100.json["error"]
        status = await pit.send("status_request", b'{"request_id": "s-1"}')
        latched = [a["alarm_id"] for a in status.json["data"]["alarms_unacknowledged"]]
        assert alarm_id in latched  # the alarm stays

        ok = await pit.send(
            "acknowledge_alarm", _signed("acknowledge_alarm", "a-2", alarm_id=alarm_id, by="S1")
        )
        assert ok.json["ok"], ok.json
        # The acknowledgement leaves from its commit, perhaps before the command's reply.
        ack = await sub.seen(on(f"{PREFIX}alarm_ack"))
        assert ack.json["payload"]["by"] == "S1"
        assert ack.json["payload"]["identity"] == f"{PREFIX}cmd/acknowledge_alarm key=pit-1"
    # The clean stop's retained offline status, signed too.
    async with Subscriber(broker.port, [f"{PREFIX}status"]) as last:
        offline = await last.until(on(f"{PREFIX}status"))
    assert offline.json["payload"]["state"] == "offline"

    keys = _registered(workdir / "feed.key")
    received = [m for m in [*sub.received, offline] if "/cmd/" not in m.topic]
    topics = {m.topic.removeprefix(PREFIX).split("/")[0] for m in received}
    assert {"status", "device", "round", "alarm", "alarm_ack", "checkpoint", "reply"} <= topics
    for message in received:
        verify_signed(message.payload, keys)
        if "/reply/" not in message.topic:
            validate_message(message)
    other = keyring([OTHER_KEY.public_key()])
    for message in received:
        try:
            verify_signed(message.payload, other)
        except FeedSignatureError as exc:
            assert exc.reason == "unknown_key"
        else:
            raise AssertionError(f"{message.topic} verified under another key")

    with sqlite3.connect(workdir / "journal.sqlite3") as conn:
        refusals = [
            json.loads(p)
            for (p,) in conn.execute("SELECT payload FROM events WHERE kind = 'command_refused'")
        ]
        [acked] = [
            json.loads(p)
            for (p,) in conn.execute("SELECT payload FROM events WHERE kind = 'alarm_acknowledged'")
        ]
    [person] = [r for r in refusals if r["reason"] == "person"]
    assert person["command"] == "acknowledge_alarm" and "S100" in person["detail"]
    assert acked["by"] == "S1" and "key=pit-1" in acked["identity"]
