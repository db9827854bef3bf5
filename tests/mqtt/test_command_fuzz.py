"""A malformed field in any command is a refusal, never another exception (docs/mqtt.md, "Signed
commands"). An outside audit found that one non-ASCII character in ``signature`` made
``hmac.compare_digest`` raise TypeError inside the MQTT session's TaskGroup: every such command
ended the session, unanswered and unjournaled.

The property: for any message on a command topic, with a verifier holding an HMAC key and an
Ed25519 key, ``parse_command_message`` returns a Command or raises CommandRefused whose words a
reply and the journal can carry. Messages start from valid signed (or unsigned) bodies of every
command kind and are mutated in any field (``signature``, ``key_id``, ``issued_at``,
``request_id``, ``kind``, the command's own fields, extra keys) to any JSON value: null,
booleans, huge integers, floats (NaN, infinities), text with any code point (lone surrogates
too, written as JSON escapes ``"\\ud800"`` or as raw surrogate bytes), arrays and objects; or to
a raw JSON token (5,000-digit numbers, 1e400, deep nesting); or raw bytes that are not UTF-8 are
spliced in. Then the same over a real Mosquitto: 20 commands with a non-ASCII signature among 20
legitimate ones, all answered, one session, the refusals journaled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.clock import utc_now
from controller.messages import COMMAND_KINDS
from controller.mqtt.publisher import MqttService
from controller.mqtt.signing import CommandVerifier, SignatureRefused, sign
from controller.mqtt.wire import (
    CommandRefused,
    ReplyPayload,
    parse_command_message,
    parse_signed_command,
)
from controller.table import Refusal
from simulators.mosquitto import Mosquitto
from tests.harness import running_table
from tests.mqtt.conftest import PREFIX, WAIT, Subscriber, mqtt_section, on, validate_message

NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
HMAC_KEY = bytes(range(32))
ED_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
KEYS: dict[str, bytes | Ed25519PublicKey] = {"cms-1": HMAC_KEY, "cms-ed": ED_KEY.public_key()}
SIGNERS: dict[str, bytes | Ed25519PrivateKey] = {"cms-1": HMAC_KEY, "cms-ed": ED_KEY}
TABLE = "PG-T1"

#: A valid body of every command kind (before request_id and the signature).
VALID: dict[str, dict[str, Any]] = {
    "open_table": {},
    "close_table": {},
    "void_round": {"reason": "cards exposed", "round_id": "PG-T1-01"},
    "set_seats": {"occupied": {"1": True, "2": False}},
    "set_wagers": {"seat": "1", "wagers": {"pai_gow": 25, "chan_chu": 5}},
    "enter_dice": {"dice": [1, 4, 6], "round_id": None},
    "player_setting": {"seat": "1", "front": ["As", "Kd"], "round_id": "PG-T1-01"},
    "status_request": {},
    "resend": {"from_seq": 3, "to_seq": 9},
    "acknowledge_alarm": {"alarm_id": "al-1", "by": "CMS operator 7", "note": "seen"},
    "sign_in": {"dealer_id": "D-1042"},
    "sign_out": {},
    "authenticate": {"nonce": "gat-2026-11-24-0001"},
}
AUTH = ("signature", "key_id", "issued_at", "request_id", "kind", "table_id", "round_id")

#: Values the audit named, and their neighbours.
TRICKY: list[Any] = [
    "é",
    "é" * 64,
    "0" * 63 + "é",
    "\ud800",
    "\udfff" * 64,
    "\ud83d\ude00",  # a valid pair: one character, 😀
    "0" * 64,
    "0" * 128,
    "",
    " ",
    "٣" * 64,  # Arabic-Indic digits: str.isdigit, not hex
    "ｆ" * 64,  # fullwidth f
    "0001-01-01T00:00:00+14:00",  # OverflowError on astimezone(UTC)
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00Z",
    "2026-11-24T10:00:00",  # no zone
    "2026-11-24T10:00:00.000Z",
    "cms-1",
    "cms-ed",
    10**400,
    -(2**63),
    2**64,
    1e308,
    -0.0,
    float("nan"),
    float("inf"),
    [],
    {},
    [[[[[]]]]],
    {"signature": {"signature": None}},
]
#: Raw JSON tokens put in place of a value (json.dumps cannot write them).
RAW: list[str] = [
    "1" + "0" * 5000,  # beyond Python's int-string limit: json.loads raises ValueError
    "1" + "0" * 4000,
    "1e400",
    "-1e-400",
    "NaN",
    "-Infinity",
    '"\\ud800"',
    '"\\udc00\\ud800"',
    '"\\ud83d\\ude00"',
    '"\\u0000"',
    "[" * 3000 + "]" * 3000,  # deeper than json.loads goes: RecursionError
    "[" * 500 + "]" * 500,
    '{"a": ' * 200 + "1" + "}" * 200,
    "tru",
    "",
]
#: Bytes that are not UTF-8: a lone byte, an encoded surrogate, an overlong NUL, a BOM.
NOT_UTF8 = [b"\xff", b"\xed\xa0\x80", b"\xc0\x80", b"\x80", b"\xef\xbb\xbf", b"\xf4\x90\x80\x80"]

text = st.text(st.characters(exclude_categories=()), max_size=70)  # lone surrogates included
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**600), max_value=10**600)
    | st.floats(allow_nan=True, allow_infinity=True)
    | text
    | st.sampled_from(TRICKY)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=10,
)


def _mutate(draw: st.DrawFn, body: dict[str, Any], names: list[str], raw: dict[str, str]) -> None:
    for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)):
        action = draw(st.sampled_from(["value", "value", "tweak", "tweak", "raw", "drop"]))
        value = body.get(name)
        if action == "tweak" and isinstance(value, str) and value:
            # One character replaced by any code point: a signature with one non-ASCII
            # character, an issued_at a digit off, a request_id with a lone surrogate.
            at = draw(st.integers(0, len(value) - 1))
            body[name] = value[:at] + draw(st.characters(exclude_categories=())) + value[at + 1 :]
        elif action == "drop":
            body.pop(name, None)
        elif action == "raw":
            marker = f"@@raw-{len(raw)}@@"
            raw[json.dumps(marker)] = draw(st.sampled_from(RAW))
            body[name] = marker
        else:
            body[name] = draw(json_values)


@st.composite
def command_messages(draw: st.DrawFn) -> tuple[str, bytes, bool]:
    """A topic and payload: a command of any kind, signed by either key or not, mutated; and
    whether the table checks signatures (an unsigned command mostly goes to a table that
    does not: its own fields then reach the validation)."""
    kind = draw(st.sampled_from(COMMAND_KINDS))
    body: dict[str, Any] = {**VALID[kind], "request_id": f"r-{draw(st.integers(0, 10**6))}"}
    raw: dict[str, str] = {}
    # The command's own fields first, then signed: a mutation there reaches the validation.
    own = [*VALID[kind], "request_id", draw(text)]
    if draw(st.integers(0, 3)) == 0:
        _mutate(draw, body, own, raw)
    key_id = draw(st.sampled_from([*SIGNERS, None]))
    if key_id is not None:
        with contextlib.suppress(UnicodeEncodeError, ValueError):  # unsignable: sent unsigned
            body = sign(SIGNERS[key_id], key_id, kind, body, NOW, table_id=TABLE)
    if draw(st.integers(0, 3)) != 0:
        _mutate(draw, body, [*AUTH, *AUTH, *body], raw)
    text_out = json.dumps(body, ensure_ascii=draw(st.booleans()), allow_nan=True)
    for marker, token in raw.items():
        text_out = text_out.replace(marker, token)
    # ensure_ascii=False leaves a lone surrogate in the text: sent as its raw (invalid) bytes.
    payload = text_out.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(payload)))
        payload = payload[:at] + draw(st.sampled_from(NOT_UTF8)) + payload[at:]
    if draw(st.integers(0, 19)) == 0:
        payload = draw(st.binary(max_size=40) | st.sampled_from([t.encode() for t in RAW]))
    topic_kind = draw(st.sampled_from([kind] * 18 + ["launch_missiles", kind + "/x"]))
    signed = key_id is not None or draw(st.integers(0, 3)) == 0
    return f"{PREFIX}cmd/{topic_kind}", payload, signed


def _carried(exc: CommandRefused, topic: str) -> None:
    """What the publisher does with a refusal: the reply and the journal record encode."""
    reply = ReplyPayload(ok=False, error=exc.error, request_id=exc.request_id, data=None)
    reply.model_dump_json().encode("utf-8")
    record = Refusal("mqtt", topic, "any", exc.reason, exc.error[:300]).record()
    json.dumps(record, ensure_ascii=False).encode("utf-8")


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command_messages())
def test_any_command_message_is_a_command_or_a_refusal(message: tuple[str, bytes, bool]) -> None:
    topic, payload, signed = message
    verifier = CommandVerifier(KEYS, clock=lambda: NOW, table_id=TABLE) if signed else None
    try:
        command = parse_command_message(PREFIX, topic, payload, verifier)
    except CommandRefused as exc:
        assert exc.error
        _carried(exc, topic)
    else:
        assert topic == f"{PREFIX}cmd/{command.kind}"
        command.model_dump_json().encode("utf-8")  # the journal can hold it


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(COMMAND_KINDS),
    st.sampled_from([*SIGNERS]),
    st.dictionaries(st.sampled_from([*AUTH, "reason", "nonce", "x"]), json_values, max_size=4),
)
def test_the_verifier_alone_signs_off_or_refuses(
    kind: str, key_id: str, changes: dict[str, Any]
) -> None:
    """CommandVerifier.verify on a body that never went through JSON (so lone surrogates and
    any value reach it): the command's fields, or SignatureRefused."""
    body = sign(
        SIGNERS[key_id], key_id, kind, {**VALID[kind], "request_id": "r-1"}, NOW, table_id=TABLE
    )
    body.update(changes)
    with contextlib.suppress(SignatureRefused):
        fields = CommandVerifier(KEYS, clock=lambda: NOW, table_id=TABLE).verify(kind, body)
        assert not set(fields) & {"signature", "key_id", "issued_at", "table_id"}


@pytest.mark.parametrize("key_id", [*SIGNERS])
@pytest.mark.parametrize("kind", COMMAND_KINDS)
def test_the_fuzzers_starting_bodies_are_accepted(kind: str, key_id: str) -> None:
    """So the property above starts from commands that run, not from refusals."""
    body = sign(
        SIGNERS[key_id], key_id, kind, {**VALID[kind], "request_id": "r-1"}, NOW, table_id=TABLE
    )
    verifier = CommandVerifier(KEYS, clock=lambda: NOW, table_id=TABLE)
    command = parse_command_message(
        PREFIX, f"{PREFIX}cmd/{kind}", json.dumps(body).encode(), verifier
    )
    assert command.kind == kind and command.request_id == "r-1"


def _signed(command: str, **changes: Any) -> bytes:
    body = sign(
        HMAC_KEY, "cms-1", command, {**VALID[command], "request_id": "r-9"}, NOW, table_id=TABLE
    )
    body.update(changes)
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (_signed("void_round", signature="é"), "signature must be hex digits"),
        (_signed("void_round", signature="0" * 63 + "é"), "signature must be hex digits"),
        (_signed("void_round", signature="٣" * 64), "signature must be hex digits"),
        (_signed("void_round", signature=["00"]), "signature must be a string, not an array"),
        (_signed("void_round", signature="\ud800"), "lone surrogate"),
        (_signed("void_round", reason="\udfff"), "lone surrogate"),
        (_signed("void_round", **{"\ud800": 1}), "lone surrogate"),
        (_signed("void_round", issued_at="0001-01-01T00:00:00+14:00"), "issued_at is out of range"),
        (_signed("void_round", issued_at="9999-12-31T23:59:59-14:00"), "issued_at is out of range"),
        (_signed("void_round", issued_at=20261124), "issued_at must be an ISO 8601 string"),
        (_signed("void_round", issued_at={"at": "now"}), "issued_at must be an ISO 8601 string"),
        (_signed("void_round", key_id=1), "key_id must be a string, not a number"),
        (_signed("void_round", key_id=["cms-1"]), "key_id must be a string, not an array"),
        (_signed("void_round", key_id=None), "needs a key_id"),
        (_signed("void_round", request_id=10**300), "needs a request_id"),
        (_signed("void_round", kind=[["void_round"]]), "kind (an array) does not match"),
        (_signed("void_round").replace(b'"r-9"', b"1" + b"0" * 5000), "expected a JSON object"),
        (_signed("void_round").replace(b'"r-9"', b'"\\ud800"'), "lone surrogate"),
        (_signed("void_round").replace(b"cards", b"\xed\xa0\x80"), "not UTF-8"),
    ],
)
def test_the_audits_findings_are_refusals(payload: bytes, expected: str) -> None:
    verifier = CommandVerifier(KEYS, clock=lambda: NOW, table_id=TABLE)
    with pytest.raises(CommandRefused) as refused:
        parse_command_message(PREFIX, f"{PREFIX}cmd/void_round", payload, verifier)
    assert expected in refused.value.error
    _carried(refused.value, f"{PREFIX}cmd/void_round")


# --- over a real Mosquitto ---------------------------------------------------------------------

BAD = 20


async def test_non_ascii_signatures_among_legitimate_commands_end_no_session(
    broker: Mosquitto, tmp_path: Path
) -> None:
    keys = tmp_path / "command-keys"
    keys.write_text(f"cms-1 hmac-sha256 {HMAC_KEY.hex()}\n")
    keys.chmod(0o600)
    extra = mqtt_section(broker, f'command_keys_file = "{keys}"')
    workdir = tmp_path / "table"
    service = MqttService()

    def body(kind: str, request_id: str, **fields: Any) -> bytes:
        return json.dumps(sign(HMAC_KEY, "cms-1", kind, {**fields, "request_id": request_id},
                               utc_now(), table_id=TABLE)).encode()  # fmt: skip

    with structlog.testing.capture_logs() as events:
        async with (
            Subscriber(broker.port, [f"{PREFIX}reply/#", f"{PREFIX}alarm"]) as sub,
            running_table(workdir, services=[service], config_extra=extra),
        ):
            await service.connected.wait()
            assert sub.client is not None
            for n in range(BAD):
                bad = json.loads(body("void_round", f"bad-{n}", reason="x", round_id="PG-T1-x"))
                bad["signature"] = bad["signature"][:-1] + "é"  # one non-ASCII character
                await sub.client.publish(f"{PREFIX}cmd/void_round", json.dumps(bad), qos=1)
                good = body("status_request", f"good-{n}")
                await sub.client.publish(f"{PREFIX}cmd/status_request", good, qos=1)
            replies: dict[str, dict[str, Any]] = {}
            with contextlib.suppress(TimeoutError):  # the assertions below say what is missing
                async with asyncio.timeout(WAIT):
                    while len(replies) < 2 * BAD:
                        item = await sub.queue.get()
                        if "/reply/" in item.topic:
                            validate_message(item)
                            replies[item.json["request_id"]] = item.json
            goods = {f"good-{n}" for n in range(BAD)}
            bads = {f"bad-{n}" for n in range(BAD)}
            assert goods <= set(replies), f"unanswered: {sorted(goods - set(replies))}"
            assert bads <= set(replies), f"unanswered: {sorted(bads - set(replies))}"
            assert all(replies[r]["ok"] for r in goods)
            assert all(replies[r]["data"]["state"] == "online" for r in goods)
            for r in bads:
                assert replies[r]["ok"] is False
                assert replies[r]["error"] == "refused: signature must be hex digits (0-9, a-f)"
            assert service.connects == 1 and service.failures == 0  # one session throughout
            assert service.refused == BAD and service.commands == BAD
            # Refused signatures are a forger's: the critical alarm is raised.
            alarm = await sub.seen(on(f"{PREFIX}alarm"))
            assert alarm.json["payload"]["code"] == "command_refused"
            assert alarm.json["payload"]["severity"] == "critical"
            # One more command, answered after every refusal was journaled (one queue, in order).
            await sub.client.publish(
                f"{PREFIX}cmd/status_request", body("status_request", "last"), qos=1
            )
            last = await sub.until(on(f"{PREFIX}reply/status_request"))
            assert last.json["request_id"] == "last" and last.json["ok"]
    assert not [e for e in events if e["event"] in ("mqtt_disconnected", "command_failed")]
    assert not [e for e in events if e["event"] == "command_parse_failed"]
    with sqlite3.connect(workdir / "journal.sqlite3") as conn:
        rows = [
            json.loads(p)
            for (p,) in conn.execute(
                "SELECT payload FROM events WHERE kind = 'command_refused' ORDER BY id"
            )
        ]
    assert len(rows) == BAD
    assert all(r["reason"] == "signature" and r["command"] == "void_round" for r in rows)
    assert all(r["channel"] == "mqtt" and "hex digits" in r["detail"] for r in rows)


async def test_a_defect_while_parsing_submitting_or_replying_ends_no_session(
    broker: Mosquitto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth (the command intake's ``_command``): a parser that raises something
    unforeseen is a ``malformed`` refusal, journaled and answered; a failing submit is answered;
    a failing reply is logged. None of them ends the session."""
    from controller.mqtt import commands
    from controller.mqtt.session import Session

    parse = parse_signed_command
    publish_acked = Session.publish_acked

    def parse_with_a_defect(
        prefix: str, topic: str, payload: bytes, *args: Any, **kwargs: Any
    ) -> Any:
        if b"parse-boom" in payload:
            raise RuntimeError("a defect in the parser")
        return parse(prefix, topic, payload, *args, **kwargs)

    async def publish_with_a_defect(self: Any, topic: str, payload: bytes, **kw: Any) -> Any:
        if b'"request_id":"reply-boom"' in payload:
            raise RuntimeError("a defect in the reply")
        return await publish_acked(self, topic, payload, **kw)

    monkeypatch.setattr(commands, "parse_signed_command", parse_with_a_defect)  # as imported
    monkeypatch.setattr(Session, "publish_acked", publish_with_a_defect)
    service = MqttService()
    workdir = tmp_path / "table"
    with structlog.testing.capture_logs() as events:
        async with (
            Subscriber(broker.port, [f"{PREFIX}reply/#"]) as sub,
            running_table(workdir, services=[service], config_extra=mqtt_section(broker)) as t,
        ):
            submit = t.daemon.submit

            async def submit_with_a_defect(command: Any, *args: Any, **kw: Any) -> Any:
                if command.request_id == "submit-boom":
                    raise RuntimeError("a defect in submit")
                return await submit(command, *args, **kw)

            monkeypatch.setattr(t.daemon, "submit", submit_with_a_defect)
            await service.connected.wait()
            assert sub.client is not None
            topic = f"{PREFIX}cmd/status_request"
            for request_id in ("parse-boom", "submit-boom", "reply-boom", "fine"):
                await sub.client.publish(topic, json.dumps({"request_id": request_id}), qos=1)
            replies = [r.json for r in await sub.take(3, on(f"{PREFIX}reply/status_request"))]
            by_id = {r["request_id"]: r for r in replies}
            assert set(by_id) == {None, "submit-boom", "fine"}  # reply-boom's reply failed
            assert by_id[None].pop("sig")["alg"] == "ed25519"  # replies are signed too
            assert by_id[None] == {
                "ok": False,
                "error": "malformed command: RuntimeError",
                "request_id": None,
                "data": None,
            }
            assert not by_id["submit-boom"]["ok"]
            assert "internal error" in by_id["submit-boom"]["error"]
            assert by_id["fine"]["ok"]
            assert service.connects == 1 and service.failures == 0
    errors = {e["event"] for e in events if e["log_level"] == "error"}
    assert {"command_parse_failed", "command_failed"} <= errors
    assert not [e for e in events if e["event"] == "mqtt_disconnected"]
    with sqlite3.connect(workdir / "journal.sqlite3") as conn:
        [(payload,)] = conn.execute("SELECT payload FROM events WHERE kind = 'command_refused'")
    refusal = json.loads(payload)
    assert refusal["reason"] == "malformed" and refusal["command"] == "status_request"
    assert refusal["detail"] == "malformed command: RuntimeError"
