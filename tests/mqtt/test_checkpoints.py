"""Signed checkpoints of the journal's hash chain over a real Mosquitto (docs/audit.md
"Checkpoints"): the casino keeps them, and a journal rewritten afterwards — its whole chain
recomputed, so the chain check alone passes — is caught by `audit verify --checkpoints`."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from controller.audit import verify_journal
from controller.feed_signature import checkpoint_link
from controller.journal.checkpoints import sign_checkpoint, verify_checkpoints
from controller.mqtt.publisher import MqttService
from controller.services.checkpoints import CheckpointService
from simulators.mosquitto import Mosquitto
from tests.forgery import cut_last_round, rewrite_row
from tests.harness import running_table
from tests.mqtt.conftest import (
    PREFIX,
    Received,
    Subscriber,
    mqtt_section,
    on,
    validate_message,
)

KEY = bytes(range(100, 132))


async def test_checkpoints_anchor_the_chain_and_catch_a_rewritten_journal(
    broker: Mosquitto, tmp_path: Path
) -> None:
    key_file = tmp_path / "checkpoint.key"
    key_file.write_text(KEY.hex() + "\n")
    key_file.chmod(0o600)
    extra = mqtt_section(broker, f'checkpoint_key_file = "{key_file}"', "checkpoint_interval = 1")
    workdir = tmp_path / "table"
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}checkpoint"]) as sub,
        running_table(workdir, services=[service], config_extra=extra) as t,
    ):
        await service.connected.wait()
        await t.deal(rng_number=3)
        first = await sub.until(on(f"{PREFIX}checkpoint"))
        await t.deal(rng_number=6)
        second = await sub.until(
            lambda m: m.json["payload"]["event_id"] > first.json["payload"]["event_id"]
        )
    for message in (first, second):
        validate_message(message)
        body = message.json["payload"]
        assert body["hmac"] == sign_checkpoint(KEY, body) and body["key_id"] == "checkpoint.key"
    kept = tmp_path / "checkpoints.jsonl"
    kept.write_text("".join(json.dumps(m.json) + "\n" for m in (first, second)))
    journal = workdir / "journal.sqlite3"
    assert verify_checkpoints(journal, [first.json, second.json], KEY) == (2, [])

    def audit(*extra_args: str) -> subprocess.CompletedProcess[str]:
        command = ["audit", "verify", "--journal", str(journal), *extra_args]
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", *command],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    args = ("--checkpoints", str(kept), "--checkpoint-key", str(key_file))
    done = audit(*args)
    assert done.returncode == 0, done.stderr
    assert "checkpoints" in done.stdout and "2 checked" in done.stdout

    # A table-level row from before the first checkpoint, changed and the chain recomputed.
    with sqlite3.connect(journal) as conn:
        (row,) = conn.execute(
            "SELECT min(id) FROM events WHERE round_id IS NULL AND payload LIKE '{%'"
        ).fetchone()
    assert row < first.json["payload"]["event_id"]
    rewrite_row(journal, row)
    assert verify_journal(journal).ok  # the chain alone cannot tell: it was recomputed
    checked, problems = verify_checkpoints(journal, [first.json, second.json], KEY)
    assert checked == 2 and len(problems) == 2
    assert all("rewritten after it" in what for _, what in problems)
    done = audit(*args)
    assert done.returncode == 1
    assert f"event row {first.json['payload']['event_id']}" in done.stderr
    # A checkpoint the table never signed (a forged anchor) is refused too.
    forged = {**first.json["payload"], "chain": "0" * 64}
    _, problems = verify_checkpoints(journal, [forged], KEY)
    assert problems and "HMAC is wrong" in problems[0][1]


async def test_every_round_close_is_anchored_and_the_feed_finds_a_cut_tail(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """The casino's copy of the feed (`monitor --json` lines: rounds and checkpoints) against
    the journal: whole, it verifies; with the last round cut off the journal, it does not."""
    key_file = tmp_path / "checkpoint.key"
    key_file.write_text(KEY.hex() + "\n")
    key_file.chmod(0o600)
    # An hour between timed checkpoints: the ones seen here come from the rounds' closes.
    extra = mqtt_section(
        broker, f'checkpoint_key_file = "{key_file}"', "checkpoint_interval = 3600"
    )
    workdir = tmp_path / "table"
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX}round", f"{PREFIX}checkpoint"]) as sub,
        running_table(workdir, services=[service], config_extra=extra) as t,
    ):
        await service.connected.wait()
        closed = [await t.deal(rng_number=n) for n in (2, 5, 7)]
        for result in closed:

            def its_round(m: Received, round_id: str = result.round_id) -> bool:
                return m.topic.endswith("round") and m.json["payload"]["round_id"] == round_id

            await sub.seen(its_round)

        def checkpoints() -> list[Any]:
            return [m for m in sub.received if m.topic == f"{PREFIX}checkpoint"]

        async with asyncio.timeout(10):
            while len(checkpoints()) < 3:  # one per round closed
                sub.arrived.clear()
                await sub.arrived.wait()
    journal = workdir / "journal.sqlite3"
    feed = tmp_path / "feed.jsonl"
    feed.write_text(
        "".join(
            json.dumps({"topic": m.topic, "retain": False, "payload": m.json}) + "\n"
            for m in sub.received
        )
    )

    def audit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", "audit", "verify", "--journal",
             str(journal), "--feed", str(feed), "--checkpoint-key", str(key_file)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    done = audit()
    assert done.returncode == 0, done.stderr
    assert "3 rounds and" in done.stdout
    last = closed[-1]
    with sqlite3.connect(journal) as conn:
        (first_cut,) = conn.execute(
            "SELECT min(id) FROM events WHERE round_id = ?", (last.round_id,)
        ).fetchone()
        conn.execute("DELETE FROM events WHERE id >= ?", (first_cut,))
        conn.execute("DELETE FROM rounds WHERE round_id = ?", (last.round_id,))
    assert verify_journal(journal).ok  # the journal alone is a shorter, whole chain
    done = audit()
    assert done.returncode == 1 and last.round_id in done.stderr
    assert "the journal does not hold it" in done.stderr


def _journaled_checkpoints(journal: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(journal) as conn:
        rows = conn.execute("SELECT payload FROM events WHERE kind = 'checkpoint' ORDER BY id")
        return [json.loads(payload) for (payload,) in rows]


async def _deal_and_checkpoint(workdir: Path, rounds: int) -> list[dict[str, Any]]:
    """Run the table (checkpoints on every round's close), deal ``rounds`` rounds, stop; the
    checkpoints the journal holds then."""
    service = CheckpointService(KEY, "checkpoint.key", interval=3600)
    journal = workdir / "journal.sqlite3"
    async with running_table(workdir, services=[service]) as t:
        for n in range(rounds):
            before = len(_journaled_checkpoints(journal))
            await t.deal(rng_number=n % 7 + 1)
            # As at a real table, where rounds are seconds apart: the close's checkpoint (made
            # just after the round's messages went out) is journaled before the next deal.
            async with asyncio.timeout(10):
                while len(_journaled_checkpoints(journal)) == before:
                    await asyncio.sleep(0.02)
    return _journaled_checkpoints(journal)


async def test_a_rewritten_round_shows_at_the_next_checkpoint(tmp_path: Path) -> None:
    """Live, not at export: the pit holds only the last checkpoint; the table's journal is
    rewritten under it (a settled round changed, the chain recomputed) and the table goes on.
    Its next checkpoint names the last one's row with the hash the journal holds there now."""
    workdir = tmp_path / "table"
    first = await _deal_and_checkpoint(workdir, 2)
    assert len(first) == 2 and first[0]["prev_event_id"] is None
    held = first[-1]  # what the pit holds
    assert checkpoint_link(first[0], held) is None  # the honest chain of checkpoints
    journal = workdir / "journal.sqlite3"
    with sqlite3.connect(journal) as conn:
        (row,) = conn.execute("SELECT min(id) FROM events WHERE kind = 'packet_dealt'").fetchone()
    assert row < held["event_id"]
    rewrite_row(journal, row)  # a dealt packet of the first round, the chain recomputed
    after = (await _deal_and_checkpoint(workdir, 1))[len(first) :]
    new = after[0]
    assert new["hmac"] == sign_checkpoint(KEY, new)  # genuinely the table's, link included
    problem = checkpoint_link(held, new)
    assert problem is not None and problem.kind == "rewritten", problem
    # The audit of the checkpoints the casino kept says so too.
    _, problems = verify_checkpoints(journal, [*first, new], KEY)
    assert any("does not follow the one before it (rewritten)" in what for _, what in problems)


async def test_a_cut_tail_shows_at_the_next_checkpoint(tmp_path: Path) -> None:
    """The journal's tail cut (the last round and its checkpoint) while the row counter goes
    on, so the next rows look new: the next checkpoint names an older checkpoint than the one
    the pit holds."""
    workdir = tmp_path / "table"
    first = await _deal_and_checkpoint(workdir, 2)
    held = first[-1]
    journal = workdir / "journal.sqlite3"
    cut_last_round(journal)
    assert verify_journal(journal).ok  # a shorter, whole chain
    new = (await _deal_and_checkpoint(workdir, 1))[-1]
    assert new["event_id"] > held["event_id"]  # the counter went on
    problem = checkpoint_link(held, new)
    assert problem is not None and problem.kind == "cut", problem
    assert new["prev_event_id"] == first[0]["event_id"]
