"""What a signed command is valid for (docs/mqtt.md, "Signed commands"): one table, and for a
command that acts on a round, that round.

The outside audit's finding: the signature covered only the command's kind and body, so a
command signed for one table was valid on every table sharing the key, and a ``void_round``
without ``round_id`` voided whatever round was current when it arrived. Now a signed command
carries ``table_id`` (signed with the rest) and the table refuses another table's; a signed
``void_round``, ``player_setting`` or ``enter_dice`` carries ``round_id`` and the table refuses
one that is missing or is not the round it would act on.

The attacks are made with the bytes an integrator's HMAC gives (``_signed``: the documented
canonical form, no help from ``sign()``, which refuses to sign such commands), so they run the
same against the code before this rule.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
import sqlite3
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.clock import iso, utc_now
from controller.daemon import wait_for
from controller.mqtt.publisher import MqttService
from controller.mqtt.signing import CommandVerifier, SignatureRefused, canonical
from controller.table import Effect, RoundProgress
from simulators.mosquitto import Mosquitto
from tests.harness import RunningTable, running_table
from tests.mqtt.conftest import PREFIX, WAIT, Received, Subscriber, mqtt_section, on

KEY = bytes(range(32))
NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
TABLE_A = "PG-T1"
TABLE_B = "PG-T2"
PREFIX_A = PREFIX
PREFIX_B = f"casino/demo/paigow/{TABLE_B}/"


def _signed(
    kind: str,
    fields: dict[str, Any],
    *,
    table: str | None = TABLE_A,
    at: datetime | None = None,
    key: bytes = KEY,
) -> dict[str, Any]:
    """A body signed as docs/mqtt.md says, by hand: ``table_id`` (None: left out, as every
    signed command was before the rule), ``key_id``, ``issued_at``, then the HMAC-SHA256 of
    ``kind``, a newline and the body's canonical JSON."""
    body = {**fields, "key_id": "cms-1", "issued_at": iso(at or utc_now())}
    if table is not None:
        body["table_id"] = table
    body["signature"] = hmac.new(key, canonical(kind, body), hashlib.sha256).hexdigest()
    return body


def _keys(tmp_path: Path) -> Path:
    path = tmp_path / "command-keys"
    path.write_text(f"# shared by the whole pit\ncms-1 hmac-sha256 {KEY.hex()}\n")
    path.chmod(0o600)
    return path


def _journal(workdir: Path, kind: str) -> list[dict[str, Any]]:
    with sqlite3.connect(workdir / "journal.sqlite3") as conn:
        return [
            json.loads(p)
            for (p,) in conn.execute(
                "SELECT payload FROM events WHERE kind = ? ORDER BY id", (kind,)
            )
        ]


def _rounds(workdir: Path) -> dict[str, str]:
    with sqlite3.connect(workdir / "journal.sqlite3") as conn:
        return dict(conn.execute("SELECT round_id, status FROM rounds"))


# --- the verifier alone ------------------------------------------------------------------------


def _verifier(table: str = TABLE_B) -> CommandVerifier:
    return CommandVerifier({"cms-1": KEY}, clock=lambda: NOW, table_id=table)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            _signed("close_table", {"request_id": "a-1"}, at=NOW),
            "signed for table 'PG-T1', this is table 'PG-T2'",
        ),
        (
            _signed("close_table", {"request_id": "a-2"}, at=NOW, table=None),
            "a signed command names the table it is for: table_id (this is table 'PG-T2')",
        ),
    ],
)
def test_the_verifier_refuses_a_command_signed_for_another_table_or_none(
    body: dict[str, Any], expected: str
) -> None:
    with pytest.raises(SignatureRefused) as refused:
        _verifier().verify("close_table", body)
    assert expected in str(refused.value)
    # The same bytes are good for the table they name (a genuine signature, not a forgery).
    if body.get("table_id") == TABLE_A:
        assert "table_id" not in _verifier(TABLE_A).verify("close_table", body)


def test_the_table_id_is_covered_by_the_signature() -> None:
    body = _signed("close_table", {"request_id": "a-4"}, at=NOW)
    body["table_id"] = TABLE_B  # readdressed after signing
    with pytest.raises(SignatureRefused, match="wrong signature"):
        _verifier().verify("close_table", body)
    wrong_type = _signed("close_table", {"request_id": "a-5"}, at=NOW, table=None)
    wrong_type["table_id"] = 7
    wrong_type["signature"] = hmac.new(
        KEY, canonical("close_table", wrong_type), hashlib.sha256
    ).hexdigest()
    with pytest.raises(SignatureRefused, match="table_id must be a string, not a number"):
        _verifier().verify("close_table", wrong_type)


@pytest.mark.parametrize(
    ("kind", "fields", "expected"),
    [
        ("void_round", {"reason": "x"}, "a signed void_round needs the round_id"),
        ("void_round", {"round_id": None}, "round_id must name a round, not null"),
        ("void_round", {"round_id": ""}, "round_id must name a round, not an empty string"),
        ("player_setting", {"seat": "1", "house_way": True}, "a signed player_setting needs"),
        ("player_setting", {"seat": "1", "round_id": 3}, "must name a round, not a number"),
        ("enter_dice", {"dice": [1, 2, 3]}, "a signed enter_dice needs the round_id"),
        ("enter_dice", {"dice": [1, 2, 3], "round_id": ["r"]}, "not an array"),
    ],
)
def test_a_signed_round_scoped_command_must_name_its_round(
    kind: str, fields: dict[str, Any], expected: str
) -> None:
    body = _signed(kind, {**fields, "request_id": "r-1"}, at=NOW, table=TABLE_B)
    with pytest.raises(SignatureRefused, match=expected):
        _verifier().verify(kind, body)


def test_enter_dice_between_deals_names_no_round_and_table_scoped_commands_need_none() -> None:
    verifier = _verifier()
    dice = _signed("enter_dice", {"dice": [1, 2, 3], "round_id": None, "request_id": "d-1"},
                   at=NOW, table=TABLE_B)  # fmt: skip
    assert verifier.verify("enter_dice", dice) == {
        "dice": [1, 2, 3],
        "round_id": None,
        "request_id": "d-1",
    }
    for n, kind in enumerate(("open_table", "close_table", "sign_out", "status_request")):
        body = _signed(kind, {"request_id": f"t-{n}"}, at=NOW, table=TABLE_B)
        assert verifier.verify(kind, body) == {"request_id": f"t-{n}"}


def test_sign_refuses_what_the_table_would_refuse() -> None:
    from controller.mqtt.signing import sign

    with pytest.raises(ValueError, match="names the table it is for"):
        sign(KEY, "cms-1", "close_table", {"request_id": "s-1"}, NOW)
    with pytest.raises(ValueError, match="the body names table 'PG-T1', not 'PG-T2'"):
        sign(KEY, "cms-1", "close_table", {"table_id": TABLE_A}, NOW, table_id=TABLE_B)
    with pytest.raises(ValueError, match="a signed void_round needs the round_id"):
        sign(KEY, "cms-1", "void_round", {"reason": "x"}, NOW, table_id=TABLE_A)
    signed = sign(KEY, "cms-1", "void_round", {"round_id": "R"}, NOW, table_id=TABLE_A)
    assert signed["table_id"] == TABLE_A
    assert signed == _signed("void_round", {"round_id": "R"}, at=NOW)  # the same bytes


# The round a command may name is checked by the table: tests/table/test_scope.py.


def test_an_unsigned_command_may_name_its_table_but_never_another() -> None:
    from controller.mqtt.wire import CommandRefused, parse_command_message

    topic = f"{PREFIX_A}cmd/close_table"
    command = parse_command_message(PREFIX_A, topic, b'{"table_id": "PG-T1"}', table_id=TABLE_A)
    assert command.kind == "close_table"
    with pytest.raises(CommandRefused, match="addressed to table 'PG-T2', this is table 'PG-T1'"):
        parse_command_message(PREFIX_A, topic, b'{"table_id": "PG-T2"}', table_id=TABLE_A)


# --- the CLI -----------------------------------------------------------------------------------


def _sign_command(*args: str) -> tuple[int, str, str]:
    from controller.cli.main import main as cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli(["sign-command", *args])
    return code, out.getvalue(), err.getvalue()


def test_sign_command_names_the_table_from_an_argument_or_the_config(tmp_path: Path) -> None:
    from simulators.demo import DEMO_CONFIG

    keys = _keys(tmp_path)
    common = ["--keys-file", str(keys), "--key-id", "cms-1"]
    code, out, _ = _sign_command("close_table", "{}", "--table-id", TABLE_B, *common)
    assert code == 0
    body = json.loads(out)
    assert body["table_id"] == TABLE_B
    verifier = CommandVerifier({"cms-1": KEY}, window=3600.0, table_id=TABLE_B)
    assert verifier.verify("close_table", body) == {"request_id": body["request_id"]}
    # From the table's own config file.
    config = tmp_path / "table.toml"
    config.write_text(
        DEMO_CONFIG.format(table=TABLE_B, shuffler="/dev/null", rng="/dev/null", journal="j")
    )
    round_body = '{"reason": "x", "round_id": "PG-T2-01"}'
    code, out, _ = _sign_command("void_round", round_body, "--config", str(config), *common)
    assert code == 0 and json.loads(out)["table_id"] == TABLE_B
    # No table, or a round-scoped command without its round: nothing is signed.
    with pytest.raises(SystemExit):
        _sign_command("close_table", "{}", *common)
    code, out, err = _sign_command("void_round", '{"reason": "x"}', "--table-id", TABLE_B, *common)
    assert code == 2 and out == "" and "needs the round_id" in err


# --- over a real Mosquitto ---------------------------------------------------------------------


async def _send(sub: Subscriber, prefix: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    assert sub.client is not None
    await sub.client.publish(f"{prefix}cmd/{kind}", json.dumps(body).encode(), qos=1)
    reply = await sub.until(on(f"{prefix}reply/{kind}"))
    return dict(reply.json)


async def test_a_command_signed_for_one_table_is_refused_by_another_sharing_the_key(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """The audit's replay: tables A and B share a key (one per pit). The casino system closes
    table A; someone who can publish on the broker (and read A's command topic) sends the same
    bytes to table B within the window. B has never seen that request id. B must refuse it,
    journal the refusal and answer why; A is unaffected."""
    keys = _keys(tmp_path)
    extra = mqtt_section(broker, f'command_keys_file = "{keys}"')
    service_a, service_b = MqttService(), MqttService()
    topics = [f"{PREFIX_A}reply/#", f"{PREFIX_B}reply/#", f"{PREFIX_A}cmd/#"]
    async with (
        Subscriber(broker.port, topics) as sub,
        running_table(tmp_path / "a", services=[service_a], config_extra=extra) as a,
        running_table(
            tmp_path / "b", services=[service_b], config_extra=extra, table_id=TABLE_B, seed=2
        ) as b,
    ):
        await asyncio.wait_for(service_a.connected.wait(), WAIT)
        await asyncio.wait_for(service_b.connected.wait(), WAIT)
        # A command signed as before the rule (no table named) is valid nowhere.
        unbound = _signed("close_table", {"request_id": "old-1"}, table=None)
        refused = await _send(sub, PREFIX_B, "close_table", unbound)
        assert not refused["ok"], "a signed command naming no table ran on table B"
        assert "names the table it is for" in refused["error"]
        assert b.daemon.table.table_open
        # The casino system closes table A, as it should.
        for_a = _signed("close_table", {"request_id": "cms-7781"})
        assert (await _send(sub, PREFIX_A, "close_table", for_a))["ok"]
        assert not a.daemon.table.table_open
        # The replay: A's exact bytes, as seen on A's command topic, sent to B.
        seen: Received = await sub.seen(on(f"{PREFIX_A}cmd/close_table"))
        assert seen.json == for_a
        assert sub.client is not None
        await sub.client.publish(f"{PREFIX_B}cmd/close_table", seen.payload, qos=1)
        replayed = (await sub.until(on(f"{PREFIX_B}reply/close_table"))).json
        assert replayed.pop("sig")["alg"] == "ed25519"  # B's reply, signed by B
        assert replayed == {
            "ok": False,
            "error": "refused: signed for table 'PG-T1', this is table 'PG-T2'",
            "request_id": "cms-7781",
            "data": None,
        }
        assert b.daemon.table.table_open  # B still deals
        # B still takes what is signed for it.
        reopen = _signed("open_table", {"request_id": "b-1"}, table=TABLE_B)
        assert (await _send(sub, PREFIX_B, "open_table", reopen))["ok"]
    refusals = _journal(tmp_path / "b", "command_refused")
    assert [(r["reason"], r["command"]) for r in refusals] == [("signature", "close_table")] * 2
    assert refusals[1]["identity"] == f"{PREFIX_B}cmd/close_table"
    assert refusals[1]["detail"] == "refused: signed for table 'PG-T1', this is table 'PG-T2'"
    assert not _journal(tmp_path / "b", "command.close_table")  # never reached table B
    assert len(_journal(tmp_path / "a", "command.close_table")) == 1
    assert not _journal(tmp_path / "a", "command_refused")


async def _position_awaited(t: RunningTable) -> str:
    """Deal a deck without pressing the RNG box: the round waits for its first position."""
    waiting = asyncio.Event()
    found: list[str] = []

    def listen(effect: Effect) -> None:
        if isinstance(effect, RoundProgress) and effect.waiting_for == "position":
            found.append(effect.round_id)
            waiting.set()

    t.daemon.subscribe(listen)
    await t.shuffler.deal()
    await asyncio.wait_for(wait_for(lambda: bool(found), waiting), WAIT)
    return found[-1]


async def test_a_round_scoped_command_must_name_the_round_it_acts_on(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """The attack: a signed void_round meant for round 1 (no round_id, as before) is held back
    and delivered after round 2 settled; it must not void round 2 (before the rule, it did). A
    command naming a round the table would not act on (an earlier round, a round not being
    dealt) is refused before the table, journaled and answered; the right round is accepted."""
    keys = _keys(tmp_path)
    extra = mqtt_section(broker, f'command_keys_file = "{keys}"')
    workdir = tmp_path / "table"
    service = MqttService()
    async with (
        Subscriber(broker.port, [f"{PREFIX_A}reply/#"]) as sub,
        running_table(workdir, services=[service], config_extra=extra) as t,
    ):
        await asyncio.wait_for(service.connected.wait(), WAIT)

        async def send(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
            return await _send(sub, PREFIX_A, kind, _signed(kind, fields))

        first = await t.deal(rng_number=2)
        held_back = {"reason": "cards exposed", "request_id": "v-1"}  # no round named
        stale = {"reason": "cards exposed", "request_id": "v-2", "round_id": first.round_id}
        second = await t.deal(rng_number=3)
        assert second.status == "settled"
        # Signed as before the rule (no table, no round): it must not void round 2.
        late = await _send(
            sub, PREFIX_A, "void_round", _signed("void_round", held_back, table=None)
        )
        assert not late["ok"], f"round 2 ({second.round_id}) voided by a late void: {late}"
        assert "names the table it is for" in late["error"]
        # Signed for this table, still without its round: refused too.
        late = await send("void_round", {**held_back, "request_id": "v-1b"})
        assert not late["ok"], f"round 2 ({second.round_id}) voided by a late void: {late}"
        assert "a signed void_round needs the round_id" in late["error"]
        wrong = await send("void_round", stale)
        assert not wrong["ok"]
        assert wrong["error"] == (
            f"refused: round_id {first.round_id!r} is not the round this void_round would act "
            f"on: the table's round is {second.round_id!r}"
        )
        setting = {"seat": "1", "house_way": True, "request_id": "p-1"}
        assert "needs the round_id" in (await send("player_setting", setting))["error"]
        earlier = {**setting, "request_id": "p-2", "round_id": first.round_id}
        assert "is not the round" in (await send("player_setting", earlier))["error"]
        # Dice: for the round being dealt, or null between deals (the next deal's).
        dice = {"dice": [2, 3, 4], "request_id": "d-1"}
        assert "needs the round_id" in (await send("enter_dice", dice))["error"]
        named = {**dice, "request_id": "d-2", "round_id": second.round_id}
        assert "no round is being dealt" in (await send("enter_dice", named))["error"]
        dealing = await _position_awaited(t)
        between = {**dice, "request_id": "d-3", "round_id": None}
        refused = await send("enter_dice", between)
        assert f"the round being dealt is {dealing!r}" in refused["error"]
        accepted = await send("enter_dice", {**dice, "request_id": "d-4", "round_id": dealing})
        assert accepted["ok"], accepted
        third = await t.next_closed()
        assert third.round_id == dealing and third.status == "settled"
        assert third.first_position is not None and third.first_position.dice == (2, 3, 4)
        voided = await send("void_round", {**stale, "request_id": "v-3", "round_id": dealing})
        assert voided["ok"] and voided["data"] == {"round_id": dealing}
        assert (await t.next_closed()).status == "void"
    rounds = _rounds(workdir)
    assert rounds[first.round_id] == "settled" and rounds[second.round_id] == "settled"
    assert rounds[dealing] == "void"
    refusals = [(r["command"], r["reason"]) for r in _journal(workdir, "command_refused")]
    assert refusals == [
        ("void_round", "signature"),
        ("void_round", "signature"),
        ("void_round", "round"),
        ("player_setting", "signature"),
        ("player_setting", "round"),
        ("enter_dice", "signature"),
        ("enter_dice", "round"),
        ("enter_dice", "round"),
    ]
    assert len(_journal(workdir, "command.void_round")) == 1
    assert len(_journal(workdir, "command.enter_dice")) == 1
    assert not _journal(workdir, "command.player_setting")
