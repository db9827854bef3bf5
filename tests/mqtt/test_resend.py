"""``resend``: a consumer that lost messages downstream of the broker (a broker that lost a
shared subscription's messages at its restart, a consumer session that expired) asks the table
for them again; the table publishes its kept copies, replayed, the same messages (docs/mqtt.md
§3). Through the real daemon, the real broker and the journal on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.clock import utc_now
from controller.journal import Journal
from controller.journal import store as journal_store
from controller.mqtt.commands import RESEND_PER_MINUTE
from controller.mqtt.publisher import MqttService
from controller.mqtt.signing import CommandVerifier, SignatureRefused, sign
from simulators.mosquitto import Mosquitto
from tests.harness import running_table
from tests.mqtt.conftest import PREFIX, Subscriber, mqtt_section, on, status_is, validate_message


def _unsigned(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("sig", "replayed")}


async def test_a_lost_range_comes_again_as_the_same_messages(
    broker: Mosquitto, tmp_path: Path
) -> None:
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}round", f"{PREFIX}reply/#", f"{PREFIX}status"]) as sub,
        running_table(tmp_path, services=[service], config_extra=mqtt_section(broker)) as t,
    ):
        await sub.until(status_is("online"))
        for _ in range(3):
            await t.deal()
        first = await sub.take(3, lambda m: m.topic == f"{PREFIX}round")
        seqs = [m.json["seq"] for m in first]
        assert sub.client is not None
        body = {"request_id": "rs-1", "from_seq": seqs[0], "to_seq": seqs[-1]}
        await sub.client.publish(f"{PREFIX}cmd/resend", json.dumps(body).encode(), qos=1)
        reply = await sub.until(on(f"{PREFIX}reply/resend"))
        assert reply.json["ok"], reply.json
        # Every seq of the range: the three rounds and what came between them (checkpoints).
        assert reply.json["data"]["queued"] == seqs[-1] - seqs[0] + 1
        assert reply.json["data"]["oldest_kept"] == 1
        again = await sub.take(3, lambda m: m.topic == f"{PREFIX}round")
        for old, new in zip(first, again, strict=True):
            assert new.json["replayed"] is True and old.json["replayed"] is False
            assert _unsigned(new.json) == _unsigned(old.json)  # same msg_id, seq, payload
            validate_message(new)

        # Refused with a reason: a range too long, a backwards one, a field that is not a seq.
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("long", {"from_seq": 1, "to_seq": 1001}, "to_seq must be"),
            ("backwards", {"from_seq": 5, "to_seq": 4}, "to_seq must be"),
            ("zero", {"from_seq": 0, "to_seq": 4}, "from_seq"),
            ("fraction", {"from_seq": 1.5, "to_seq": 2}, "from_seq"),
        ]
        for name, payload, error in cases:
            body = {"request_id": name, **payload}
            await sub.client.publish(f"{PREFIX}cmd/resend", json.dumps(body).encode(), qos=1)
            refused = await sub.until(on(f"{PREFIX}reply/resend"))
            assert refused.json["request_id"] == name and not refused.json["ok"]
            assert error in refused.json["error"], refused.json
        # A range the table never had: nothing queued, and it says which it keeps.
        body = {"request_id": "rs-2", "from_seq": 10**6, "to_seq": 10**6 + 5}
        await sub.client.publish(f"{PREFIX}cmd/resend", json.dumps(body).encode(), qos=1)
        none = await sub.until(on(f"{PREFIX}reply/resend"))
        assert none.json["ok"] and none.json["data"]["queued"] == 0
        await t.deal()  # the table deals on, its seqs in order after the resend
        fourth = await sub.until(on(f"{PREFIX}round"))
        assert fourth.json["seq"] > seqs[-1] and fourth.json["replayed"] is False


def _publish(journal: Journal, n: int) -> list[str]:
    with journal.transaction() as tx:
        rows = [tx.enqueue(f"t/{i}", {"n": i}) for i in range(n)]
    return [r.msg_id for r in rows]


def test_the_journal_keeps_the_newest_copies_and_requeues_only_what_was_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_store, "SENT_KEPT", 5)
    with Journal.open(tmp_path / "j.sqlite3", "PG-T1") as journal:
        ids = _publish(journal, 12)
        assert journal.outbox.requeue(1, 12) == (0, None)  # nothing sent yet: nothing kept
        assert journal.outbox.ack_many(ids[:10]) == 10
        assert journal.outbox.count() == 2
        # Seqs 1..10 sent; the newest five (6..10) kept; 11 and 12 still pending.
        assert journal.outbox.requeue(1, 12) == (5, 6)
        pending = journal.outbox.pending(20)
        assert [r.seq for r in pending] == [6, 7, 8, 9, 10, 11, 12]
        assert [r.replay for r in pending] == [True] * 5 + [False] * 2
        assert [r.msg_id for r in pending] == ids[5:]
        assert journal.outbox.requeue(6, 10) == (0, 6)  # already waiting: not twice
        journal.outbox.ack_many([r.msg_id for r in pending])
        assert journal.outbox.count() == 0 and journal.outbox.requeue(12, 12) == (1, 8)


async def test_a_flood_of_resends_cannot_make_the_table_an_amplifier(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """An adversary who may publish commands (and read the source: 1,000 seqs a command) asks
    for everything again and again: the table sends at most RESEND_PER_MINUTE seqs a minute,
    shortening or refusing the rest, and deals on."""
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}reply/#", f"{PREFIX}status"]) as sub,
        running_table(tmp_path, services=[service], config_extra=mqtt_section(broker)) as t,
    ):
        await sub.until(status_is("online"))
        assert sub.client is not None
        for n in range(8):
            body = {"request_id": f"flood-{n}", "from_seq": 1, "to_seq": 1000}
            await sub.client.publish(f"{PREFIX}cmd/resend", json.dumps(body).encode(), qos=1)
        replies = await sub.take(8, lambda m: m.topic == f"{PREFIX}reply/resend")
        granted = [r.json["data"]["to_seq"] for r in replies if r.json["ok"]]
        refused = [r.json["error"] for r in replies if not r.json["ok"]]
        # The minute's budget, and what it refilled while the flood arrived (a few seconds).
        assert RESEND_PER_MINUTE <= sum(granted) <= RESEND_PER_MINUTE + 500, granted
        # Five asked in full fill the minute's budget; which five is the order the table took
        # them in, which a loaded machine does not keep to the order they were published in.
        assert sorted(granted, reverse=True)[:5] == [1000] * 5, granted
        assert len(granted) + len(refused) == 8
        assert all("seqs a minute" in e for e in refused)
        assert refused or granted[-1] < 1000  # the tail shortened or refused
        await t.deal()  # the table deals on


async def test_with_signed_commands_only_a_signed_resend_for_this_table_runs(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """An adversary on the broker, with the source: unsigned (on a table that requires even
    read-only commands signed), signed with another key, signed for another table, or a signed
    one replayed — each refused with its reason, nothing published again; the casino's own
    signed resend runs."""
    key, other = bytes(range(32)), bytes(range(1, 33))
    keys = tmp_path / "command-keys"
    keys.write_text(f"cms-1 hmac-sha256 {key.hex()}\n")
    keys.chmod(0o600)

    def signed(request_id: str, secret: bytes = key, table: str = "PG-T1") -> bytes:
        body = {"request_id": request_id, "from_seq": 1, "to_seq": 50}
        return json.dumps(sign(secret, "cms-1", "resend", body, utc_now(), table_id=table)).encode()

    extra = mqtt_section(broker, f'command_keys_file = "{keys}"', "unsigned_read_only = false")
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}reply/#", f"{PREFIX}round"]) as sub,
        running_table(tmp_path / "t", services=[service], config_extra=extra) as t,
    ):
        await service.connected.wait()
        await t.deal()
        await sub.until(on(f"{PREFIX}round"))
        assert sub.client is not None
        attacks = [
            (b'{"request_id": "u-1", "from_seq": 1, "to_seq": 50}', "not signed"),
            (signed("k-1", secret=other), "signature"),
            (signed("t-1", table="PG-T9"), "PG-T9"),
        ]
        for body, error in attacks:
            await sub.client.publish(f"{PREFIX}cmd/resend", body, qos=1)
            reply = await sub.until(on(f"{PREFIX}reply/resend"))
            assert not reply.json["ok"] and error in reply.json["error"], reply.json
        good = signed("s-1")
        await sub.client.publish(f"{PREFIX}cmd/resend", good, qos=1)
        reply = await sub.until(on(f"{PREFIX}reply/resend"))
        assert reply.json["ok"] and reply.json["data"]["queued"] >= 1, reply.json
        again = await sub.until(on(f"{PREFIX}round"))
        assert again.json["replayed"] is True
        await sub.client.publish(f"{PREFIX}cmd/resend", good, qos=1)  # the same, replayed
        replayed = await sub.until(on(f"{PREFIX}reply/resend"))
        assert not replayed.json["ok"] and "replay" in replayed.json["error"], replayed.json
    assert sum(1 for m in sub.received if m.topic == f"{PREFIX}round") == 2  # once, once again


@pytest.mark.parametrize("unsigned_read_only", [True, False])
def test_an_unsigned_resend_is_refused_by_a_table_that_signs_its_commands(
    unsigned_read_only: bool,
) -> None:
    """Issue 40 (F2): a 63-byte unsigned resend made the table publish thousands of messages
    again. On a table that takes signed commands a resend is signed (the pit signs it with its
    command key), like any command that makes the table publish more than it was asked with;
    only a status_request stays read-only, unless the table requires even that signed."""
    verifier = CommandVerifier(
        {"cms-1": bytes(range(32))}, clock=utc_now, table_id="PG-T1",
        unsigned_read_only=unsigned_read_only,
    )  # fmt: skip
    with pytest.raises(SignatureRefused, match="not signed"):
        verifier.verify("resend", {"from_seq": 1, "to_seq": 9})
    if unsigned_read_only:
        assert verifier.verify("status_request", {}) == {}
    else:
        with pytest.raises(SignatureRefused, match="not signed"):
            verifier.verify("status_request", {})
