"""Signed MQTT commands (docs/mqtt.md, "Signed commands") over a real Mosquitto: the legitimate
command runs; unsigned, forged, unknown-key, stale and replayed ones are refused with a reply
saying why, also after a restart; status_request may stay unsigned. And the documented test
vector, which `openssl dgst -sha256 -mac HMAC` reproduces."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from controller.clock import utc_now
from controller.mqtt.publisher import MqttService
from controller.mqtt.signing import canonical, sign
from simulators.mosquitto import Mosquitto
from tests.harness import running_table
from tests.mqtt.conftest import PREFIX, Received, Subscriber, mqtt_section, on, validate_message

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
VECTOR_ROUND = "PG-07-01M86FVP3SQ8ZK4M2V6T0RXW3B"


def test_the_documented_test_vector() -> None:
    from datetime import UTC, datetime

    signed = sign(
        KEY,
        "cms-1",
        "void_round",
        {"reason": "cards exposed", "request_id": "r-0001", "round_id": VECTOR_ROUND},
        datetime(2026, 11, 24, 10, 0, tzinfo=UTC),
        table_id="PG-07",
    )
    assert canonical("void_round", signed) == (
        b'void_round\n{"issued_at":"2026-11-24T10:00:00.000Z","key_id":"cms-1",'
        b'"reason":"cards exposed","request_id":"r-0001",'
        b'"round_id":"PG-07-01M86FVP3SQ8ZK4M2V6T0RXW3B","table_id":"PG-07"}'
    )
    assert signed["signature"] == (
        "986ead3a9e689f0582ce6eb8e50dd8a3c3938588103920867e124cb8769edac2"
    )


def test_the_documented_openssl_command_reproduces_the_vector() -> None:
    """docs/mqtt.md's openssl line, run as written there."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "mqtt.md").read_text()
    [line] = [x for x in docs.splitlines() if x.startswith("printf 'void_round")]
    script = line.rstrip(" \\") + (" | openssl dgst -sha256 -mac HMAC -macopt hexkey:" + KEY.hex())
    assert f"hexkey:{KEY.hex()}" in docs
    done = subprocess.run(["sh", "-c", script], check=True, capture_output=True, text=True)
    assert done.stdout.split()[-1] == (
        "986ead3a9e689f0582ce6eb8e50dd8a3c3938588103920867e124cb8769edac2"
    )


def _keys(tmp_path: Path) -> Path:
    path = tmp_path / "command-keys"
    path.write_text(f"# the casino system\ncms-1 hmac-sha256 {KEY.hex()}\n")
    path.chmod(0o600)
    return path


def _body(kind: str, request_id: str, key: bytes = KEY, age: float = 0, **fields: Any) -> bytes:
    signed = sign(
        key,
        "cms-1",
        kind,
        {**fields, "request_id": request_id},
        utc_now() - timedelta(seconds=age),
        table_id="PG-T1",
    )
    return json.dumps(signed).encode()


async def test_signed_commands_run_and_everything_else_is_refused(
    broker: Mosquitto, tmp_path: Path
) -> None:
    extra = mqtt_section(broker, f'command_keys_file = "{_keys(tmp_path)}"')
    workdir = tmp_path / "table"
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}reply/#"]) as sub,
        running_table(workdir, services=[service], config_extra=extra) as t,
    ):
        await service.connected.wait()
        assert sub.client is not None
        settled = await t.deal(rng_number=2)

        async def send(kind: str, body: bytes) -> dict[str, Any]:
            assert sub.client is not None
            await sub.client.publish(f"{PREFIX}cmd/{kind}", body, qos=1)
            reply = await sub.until(on(f"{PREFIX}reply/{kind}"))
            return dict(reply.json)

        unsigned = await send("void_round", b'{"reason": "x", "request_id": "u-1"}')
        assert not unsigned["ok"] and "not signed" in unsigned["error"]
        forged = await send(
            "void_round",
            _body("void_round", "f-1", key=OTHER, reason="x", round_id=settled.round_id),
        )
        assert not forged["ok"] and "wrong signature" in forged["error"]
        tampered = json.loads(_body("void_round", "t-1", reason="x", round_id=settled.round_id))
        tampered["reason"] = "changed after signing"
        changed = await send("void_round", json.dumps(tampered).encode())
        assert not changed["ok"] and "wrong signature" in changed["error"]
        unknown = json.loads(_body("void_round", "k-1", reason="x", round_id=settled.round_id))
        unknown["key_id"] = "mallory"
        nokey = await send("void_round", json.dumps(unknown).encode())
        assert not nokey["ok"] and "unknown key_id" in nokey["error"]
        stale = await send(
            "void_round",
            _body("void_round", "s-1", age=300, reason="x", round_id=settled.round_id),
        )
        assert not stale["ok"] and "window" in stale["error"]
        assert (await send("status_request", b'{"request_id": "ro-1"}'))["ok"]  # read-only
        legit = _body("void_round", "v-1", reason="cards exposed", round_id=settled.round_id)
        accepted = await send("void_round", legit)
        assert accepted["ok"], accepted
        voided = await t.next_closed()
        assert voided.round_id == settled.round_id and voided.status == "void"
        replayed = await send("void_round", legit)
        assert not replayed["ok"] and "replay" in replayed["error"]

    # After a restart the journal remembers the request id: the replay is still refused.
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}reply/#"]) as sub,
        running_table(workdir, services=[service], config_extra=extra, seed=2),
    ):
        await service.connected.wait()
        assert sub.client is not None
        await sub.client.publish(f"{PREFIX}cmd/void_round", legit, qos=1)
        again = (await sub.until(on(f"{PREFIX}reply/void_round"))).json
        assert not again["ok"] and "replay" in again["error"]
    with sqlite3.connect(workdir / "journal.sqlite3") as conn:
        kinds = [k for (k,) in conn.execute("SELECT kind FROM events WHERE kind LIKE 'command.%'")]
    assert kinds.count("command.void_round") == 1  # only the signed one reached the table


def _reply_to(request_id: str) -> Callable[[Received], bool]:
    """The status_request reply naming ``request_id``."""

    def matches(m: Received) -> bool:
        return m.topic == f"{PREFIX}reply/status_request" and m.json.get("request_id") == request_id

    return matches


async def test_refusals_are_journaled_alarmed_and_a_flood_is_refused_not_dropped(
    broker: Mosquitto, tmp_path: Path
) -> None:
    extra = mqtt_section(broker, f'command_keys_file = "{_keys(tmp_path)}"')
    extra += "\n[limits]\nmqtt_commands_per_minute = 8\nmqtt_unsigned_per_minute = 8\n"
    workdir = tmp_path / "table"
    service = MqttService()
    async with (
        Subscriber(
            broker.port, [f"{PREFIX}reply/#", f"{PREFIX}alarm", f"{PREFIX}alarm_ack"]
        ) as sub,
        running_table(workdir, services=[service], config_extra=extra),
    ):
        await service.connected.wait()
        assert sub.client is not None

        async def send(kind: str, body: bytes) -> dict[str, Any]:
            assert sub.client is not None
            await sub.client.publish(f"{PREFIX}cmd/{kind}", body, qos=1)
            return dict((await sub.until(on(f"{PREFIX}reply/{kind}"))).json)

        for n in range(3):  # three forgeries: journaled, then one critical alarm
            forged = await send(
                "void_round",
                _body("void_round", f"f-{n}", key=OTHER, reason="x", round_id="PG-T1-any"),
            )
            assert not forged["ok"]
        # A message a command caused leaves from its commit, perhaps before the command's reply
        # (which `send` waits for): looked for among what arrived, not only what comes next.
        alarm = await sub.seen(on(f"{PREFIX}alarm"))
        validate_message(alarm)
        assert alarm.json["payload"]["code"] == "command_refused"
        assert alarm.json["payload"]["ack_required"] is True
        alarm_id = alarm.json["payload"]["alarm_id"]
        # Acknowledged by a signed command naming the person.
        ack = await send(
            "acknowledge_alarm",
            _body("acknowledge_alarm", "a-1", alarm_id=alarm_id, by="CMS operator 7"),
        )
        assert ack["ok"], ack
        acked = await sub.seen(on(f"{PREFIX}alarm_ack"))
        validate_message(acked)
        assert acked.json["payload"]["by"] == "CMS operator 7"
        assert acked.json["payload"]["channel"] == "mqtt"
        # A flood of unsigned read-only commands: 8 a minute of unsigned or refused ones pass
        # (the three forgeries took 3), the rest are refused with a reply, one journal record
        # says how many, and the alarm is a warning the floor sees, not latched (issue 40).
        # Past the budget nothing is published in answer (an amplifier answers every one).
        for n in range(12):
            await sub.client.publish(
                f"{PREFIX}cmd/status_request", f'{{"request_id": "u-{n}"}}'.encode(), qos=1
            )
        await sub.seen(
            lambda m: m.topic == f"{PREFIX}alarm" and "flood" in m.json["payload"]["detail"]
        )

        flood = await sub.seen(
            lambda m: m.topic == f"{PREFIX}alarm" and "flood" in m.json["payload"]["detail"]
        )
        assert flood.json["payload"]["code"] == "command_refused"
        assert flood.json["payload"]["severity"] == "warning"
        assert flood.json["payload"]["ack_required"] is False
        # The casino's signed commands keep their own budget through the flood (F3).
        for n in range(3):
            await sub.client.publish(
                f"{PREFIX}cmd/status_request", _body("status_request", f"s-{n}"), qos=1
            )
            signed = await sub.seen(_reply_to(f"s-{n}"))
            assert signed.json["ok"], signed.json
        # Their own budget is bounded too: a signed flood is refused over its rate.
        for n in range(8):
            await sub.client.publish(
                f"{PREFIX}cmd/status_request", _body("status_request", f"t-{n}"), qos=1
            )
        signed_replies = [(await sub.seen(_reply_to(f"t-{n}"))).json for n in range(8)]
        assert not all(r["ok"] for r in signed_replies), signed_replies
        assert all("signed commands a minute" in r["error"] for r in signed_replies if not r["ok"])
        unsigned = [
            m.json
            for m in sub.received
            if m.topic == f"{PREFIX}reply/status_request"
            and str(m.json.get("request_id")).startswith("u-")
        ]
        assert 5 <= len(unsigned) <= 6 and all(r["ok"] for r in unsigned)  # then nothing
    with sqlite3.connect(workdir / "journal.sqlite3") as conn:
        rows = [
            json.loads(p)
            for (p,) in conn.execute(
                "SELECT payload FROM events WHERE kind = 'command_refused' ORDER BY id"
            )
        ]
    assert [r["reason"] for r in rows[:3]] == ["signature"] * 3
    assert all(r["channel"] == "mqtt" for r in rows)
    [flooded] = [r for r in rows if r["reason"] == "flood"]
    assert flooded["count"] >= 1
    assert sum(r["count"] for r in rows if r["reason"] == "flood") <= 8
    assert sum(r["count"] for r in rows if r["reason"] == "rate_limited") >= 1


async def test_a_signed_authenticate_command_answers_the_regulators_challenge(
    broker: Mosquitto, tmp_path: Path
) -> None:
    from controller.software import authenticate

    extra = mqtt_section(broker, f'command_keys_file = "{_keys(tmp_path)}"')
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}reply/#"]) as sub,
        running_table(tmp_path / "table", services=[service], config_extra=extra) as t,
    ):
        await service.connected.wait()
        assert sub.client is not None
        topic = f"{PREFIX}cmd/authenticate"
        await sub.client.publish(topic, b'{"nonce": "unsigned-1234"}', qos=1)
        # Generous waits: the table hashes every installed file for an answer (and at start),
        # which takes tens of seconds on a loaded two-core machine.
        unsigned = (await sub.until(on(f"{PREFIX}reply/authenticate"), timeout=60)).json
        assert not unsigned["ok"] and "not signed" in unsigned["error"]
        nonce = "gat-2026-11-24-0001"
        await sub.client.publish(topic, _body("authenticate", "g-1", nonce=nonce), qos=1)
        reply = (await sub.until(on(f"{PREFIX}reply/authenticate"), timeout=60)).json
        assert reply["ok"], reply
        data = reply["data"]
        assert data["hmac_sha256"] == authenticate(nonce)["hmac_sha256"]
        assert data["config_digest"] == t.daemon.table.status().config_digest
        assert data["nonce"] == nonce
    with sqlite3.connect(tmp_path / "table" / "journal.sqlite3") as conn:
        [(payload,)] = conn.execute(
            "SELECT payload FROM events WHERE kind = 'command.authenticate'"
        )
    assert json.loads(payload)["origin"]["channel"] == "mqtt"


def _openssl_ed25519(tmp_path: Path, name: str) -> tuple[Path, str]:
    """The documented recipe: a private key in PEM and the public key's 32 bytes as hex."""
    pem = tmp_path / f"{name}.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(pem)], check=True)
    der = subprocess.run(
        ["openssl", "pkey", "-in", str(pem), "-pubout", "-outform", "DER"],
        check=True,
        capture_output=True,
    ).stdout
    return pem, der[-32:].hex()


async def test_ed25519_signed_commands_with_keys_made_by_openssl(
    broker: Mosquitto, tmp_path: Path
) -> None:
    pem, public = _openssl_ed25519(tmp_path, "cms")
    other_pem, _ = _openssl_ed25519(tmp_path, "mallory")
    keys = tmp_path / "command-keys"
    keys.write_text(f"cms-ed ed25519 {public}\ncms-1 hmac-sha256 {KEY.hex()}\n")
    keys.chmod(0o600)
    extra = mqtt_section(broker, f'command_keys_file = "{keys}"')

    def signed(private: Path, request_id: str) -> bytes:
        options = ["--private-key", str(private), "--key-id", "cms-ed", "--request-id", request_id]
        options += ["--table-id", "PG-T1"]
        done = subprocess.run(
            [sys.executable, "-m", "controller.cli", "sign-command", "close_table", "{}", *options],
            check=True,
            capture_output=True,
        )
        return done.stdout.strip()

    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}reply/#"]) as sub,
        running_table(tmp_path / "table", services=[service], config_extra=extra) as t,
    ):
        await service.connected.wait()
        assert sub.client is not None
        topic = f"{PREFIX}cmd/close_table"
        await sub.client.publish(topic, signed(other_pem, "m-1"), qos=1)
        forged = (await sub.until(on(f"{PREFIX}reply/close_table"))).json
        assert not forged["ok"] and "wrong signature" in forged["error"]
        assert t.daemon.table.table_open
        await sub.client.publish(topic, signed(pem, "e-1"), qos=1)
        accepted = (await sub.until(on(f"{PREFIX}reply/close_table"))).json
        assert accepted["ok"], accepted
        assert not t.daemon.table.table_open
        # The HMAC key of the same file still works beside it.
        body = _body("open_table", "h-1")
        await sub.client.publish(f"{PREFIX}cmd/open_table", body, qos=1)
        assert (await sub.until(on(f"{PREFIX}reply/open_table"))).json["ok"]
