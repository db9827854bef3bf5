"""What goes on the wire and comes off it, without a broker: a replayed row changes only its
`replayed` field, every message signed, and commands are validated by topic and body."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.feed_signature import FeedSignatureError, FeedSigner, keyring, verify_envelope
from controller.journal import Journal, OutboxRow
from controller.messages import EnterDice, VoidRound, parse_command
from controller.mqtt.wire import (
    COMMAND_SIZE_LIMIT,
    CommandRefused,
    parse_command_message,
    wire_payload,
)
from tests.mqtt.conftest import PREFIX


def _row(payload: dict[str, object], replay: bool) -> OutboxRow:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return OutboxRow("T-1", 7, "T", f"{PREFIX}round", data, 1, False, "now", 0, replay, None)


def test_a_replayed_row_changes_only_its_replayed_field_and_both_are_signed() -> None:
    envelope = {
        "schema": "paigow.round",
        "version": 1,
        "msg_id": "PG-T1-01ABC",
        "table_id": "PG-T1",
        "seq": 7,
        "time": "2025-01-01T00:00:00.000Z",
        "replayed": False,
        "payload": {"detail": 'a “quote” and "replayed":false inside'},
    }
    signer = FeedSigner(Ed25519PrivateKey.generate())
    keys = keyring([signer.public_key])
    live = wire_payload(_row(envelope, replay=False), signer)
    assert verify_envelope(live, keys).message == envelope
    assert wire_payload(_row(envelope, replay=False), signer) == live  # a resend: same bytes
    again = wire_payload(_row(envelope, replay=True), signer)
    verified = verify_envelope(again, keys, table_id="PG-T1")
    assert verified.message == {**envelope, "replayed": True}
    assert verified.key_id == signer.key_id
    # The flag is signed: set back to false on the way, the signature no longer holds.
    assert json.loads(again)["sig"] != json.loads(live)["sig"]
    tampered = again.replace(b'"replayed":true', b'"replayed":false')
    with pytest.raises(FeedSignatureError) as refused:
        verify_envelope(tampered, keys)
    assert refused.value.reason == "bad_signature"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(payload=st.dictionaries(st.text(), _JSON, max_size=6))
def test_a_message_signed_at_its_commit_has_the_bytes_of_one_read_back(
    payload: dict[str, object],
) -> None:
    """The publisher signs a message queued in this process without parsing it again (its
    payload is stored canonical); read back from the journal (a replay, an older table's row)
    it is parsed and put in canonical form: both must be the very same bytes, or a resend of
    the message would carry another signature and a consumer see two messages."""
    signer = FeedSigner(Ed25519PrivateKey.generate())
    with Journal(":memory:", "T") as journal:
        with journal.transaction() as tx:
            fresh = tx.enqueue(f"{PREFIX}round", payload)
        (stored,) = journal.outbox.pending()
    assert fresh.canonical
    assert not stored.canonical and stored.payload == fresh.payload
    assert wire_payload(fresh, signer) == wire_payload(stored, signer)
    verified = verify_envelope(wire_payload(fresh, signer), keyring([signer.public_key]))
    assert verified.message == json.loads(stored.payload)


def test_commands_are_validated_by_topic_and_body() -> None:
    def parse(topic: str, body: bytes) -> object:
        return parse_command_message(PREFIX, f"{PREFIX}{topic}", body)

    assert parse("cmd/status_request", b"") == parse_command({"kind": "status_request"})
    dice = parse("cmd/enter_dice", b'{"dice": [1, 2, 3]}')
    assert isinstance(dice, EnterDice) and dice.dice == (1, 2, 3)
    void = parse("cmd/void_round", b'{"kind": "void_round", "request_id": "r"}')
    assert isinstance(void, VoidRound) and void.request_id == "r" and void.round_id is None
    refusals = {
        ("cmd/open_table", b'{"kind": "close_table", "request_id": "x"}'): "does not match",
        ("cmd/nope", b"{}"): "unknown command",
        ("cmd/void_round/x", b"{}"): "not a command topic",
        ("cmd/status_request", b" " * (COMMAND_SIZE_LIMIT + 1)): "too large",
        ("cmd/enter_dice", b'{"dice": [1, 2], "request_id": "x"}'): "dice",
        ("cmd/set_seats", b'"seats"'): "expected a JSON object",
        ("cmd/status_request", b"\xc3\x28"): "not UTF-8",
        ("cmd/status_request", b"{" * 9000): "expected a JSON object",
    }
    for (topic, body), expected in refusals.items():
        with pytest.raises(CommandRefused) as caught:
            parse(topic, body)
        assert expected in caught.value.error, (topic, caught.value.error)
        if b'"request_id": "x"' in body:
            assert caught.value.request_id == "x"
    with pytest.raises(CommandRefused, match="not a command topic"):
        parse_command_message(PREFIX, "casino/demo/paigow/PG-T2/cmd/open_table", b"{}")
