"""The signed feed's contract (controller/feed_signature.py), attacked as someone with access to
the broker would: an unsigned message, one signed by another key, a field changed after signing
(payload, seq, table_id, replayed), a signature copied from another message, a malformed or
non-ASCII signature, a key id swapped for another table's, a member named twice. Each is refused
with its reason; the genuine message passes. And the checkpoint link: a checkpoint that does not
name the last one held is a rewritten, cut, skipped or backwards history."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.feed_signature import (
    FeedSignatureError,
    FeedSigner,
    canonical,
    checkpoint_link,
    key_id,
    keyring,
    parse_public_key,
    public_key_line,
    verify_envelope,
    verify_signed,
)

TABLE = FeedSigner(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
OTHER = FeedSigner(Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))))
KEYS = keyring([TABLE.public_key])
BOTH = keyring([TABLE.public_key, OTHER.public_key])


def _envelope(seq: int = 7, **payload: Any) -> dict[str, Any]:
    return {
        "schema": "paigow.round",
        "version": 1,
        "msg_id": f"PG-07-01ABC{seq}",
        "table_id": "PG-07",
        "seq": seq,
        "time": "2026-11-24T10:00:00.000000Z",
        "replayed": False,
        "payload": {"round_id": "PG-07-R1", "status": "settled", "note": "é ✓", **payload},
    }


def _refused(message: bytes | dict[str, Any], keys: Any = KEYS, **kwargs: Any) -> str:
    with pytest.raises(FeedSignatureError) as refused:
        verify_envelope(message, keys, **kwargs)
    assert str(refused.value).startswith(refused.value.reason)
    return refused.value.reason


def _edit(data: bytes, **changes: Any) -> bytes:
    message = json.loads(data)
    message.update(changes)
    return json.dumps(message).encode()


def test_a_signed_envelope_verifies_and_says_who_signed_it() -> None:
    data = TABLE.sign(_envelope())
    verified = verify_envelope(data, KEYS, table_id="PG-07")
    assert verified.key_id == TABLE.key_id and verified.message == _envelope()
    # The parsed form, reordered and re-spaced, verifies too: the signature is over the content.
    assert verify_envelope(json.loads(data), KEYS).message == _envelope()
    assert verify_envelope(json.dumps(json.loads(data), indent=2), KEYS).key_id == TABLE.key_id
    assert data.endswith(b"}}") and b'"sig":{"alg":"ed25519","key_id":"ed25519:' in data


def test_the_documented_vector() -> None:
    """docs/mqtt.md's example: this key, this envelope, this key id and signature."""
    message = {
        "schema": "paigow.device",
        "version": 1,
        "msg_id": "PG-07-01M86FVP3SQ8ZK4M2V6T0RXW3B",
        "table_id": "PG-07",
        "seq": 42,
        "time": "2026-11-24T10:00:00.000000Z",
        "replayed": False,
        "payload": {"device": "shuffler", "online": True, "detail": ""},
    }
    assert canonical(message) == (
        b'{"msg_id":"PG-07-01M86FVP3SQ8ZK4M2V6T0RXW3B","payload":{"detail":"","device":'
        b'"shuffler","online":true},"replayed":false,"schema":"paigow.device","seq":42,'
        b'"table_id":"PG-07","time":"2026-11-24T10:00:00.000000Z","version":1}'
    )
    sig = json.loads(TABLE.sign(message))["sig"]
    assert public_key_line(TABLE.public_key) == (
        "ed25519 03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
    )
    assert sig["key_id"] == "ed25519:56475aa75463474c0285df5dbf2bcab7"
    assert sig["value"] == (
        "b97868f6ce4011a01c2b818104e1635e7f71249aee8ea60a5db99acfeb9d476b"
        "6530fcf0f71d1d580b2cc03b18215c14aefab198a9c85fab18df0047e612cf06"
    )


def test_unsigned_and_other_keys_are_refused() -> None:
    assert _refused(json.dumps(_envelope()).encode()) == "unsigned"
    # Signed, by a key the pit never registered for this table.
    assert _refused(OTHER.sign(_envelope())) == "unknown_key"
    # Another table's key, its key id claimed as this table's: the signature does not hold.
    forged = _edit(OTHER.sign(_envelope()), sig={**json.loads(OTHER.sign(_envelope()))["sig"]})
    forged = _edit(forged, sig={**json.loads(forged)["sig"], "key_id": TABLE.key_id})
    assert _refused(forged) == "bad_signature"


def test_a_key_id_swap_is_refused() -> None:
    """Table B's genuine message under table A's topic: with A's keys it is an unknown key;
    with B's key id swapped for A's, a bad signature; with both keys (a careless keyring), the
    table it names is still checked."""
    other = OTHER.sign(_envelope())
    assert _refused(other) == "unknown_key"
    swapped = _edit(other, sig={**json.loads(other)["sig"], "key_id": TABLE.key_id})
    assert _refused(swapped) == "bad_signature"
    b_message = OTHER.sign({**_envelope(), "table_id": "PG-08"})
    assert _refused(b_message, BOTH, table_id="PG-07") == "wrong_table"
    # A keyring whose id does not belong to its key (registered by hand, wrongly): refused.
    wrong = {TABLE.key_id: OTHER.public_key}
    assert _refused(TABLE.sign(_envelope()), wrong) == "unknown_key"


@pytest.mark.parametrize(
    "change",
    [
        {"payload": {**_envelope()["payload"], "status": "void"}},
        {"seq": 8},
        {"table_id": "PG-08"},
        {"replayed": True},
        {"time": "2026-11-24T10:00:01.000000Z"},
        {"msg_id": "PG-07-01OTHER"},
        {"schema": "paigow.player"},
        {"version": 2},
        {"extra": 1},
    ],
    ids=lambda c: next(iter(c)),
)
def test_a_field_changed_after_signing_is_refused(change: dict[str, Any]) -> None:
    assert _refused(_edit(TABLE.sign(_envelope()), **change)) == "bad_signature"


def test_a_signature_copied_from_another_message_is_refused() -> None:
    first, second = TABLE.sign(_envelope(7)), TABLE.sign(_envelope(8))
    copied = _edit(second, sig=json.loads(first)["sig"])
    assert _refused(copied) == "bad_signature"


@pytest.mark.parametrize(
    "sig",
    [
        None,
        "abc",
        [],
        {"alg": "ed25519", "key_id": TABLE.key_id},
        {"alg": "hmac-sha256", "key_id": TABLE.key_id, "value": "0" * 128},
        {"alg": "ed25519", "key_id": TABLE.key_id, "value": "0" * 127},
        {"alg": "ed25519", "key_id": TABLE.key_id, "value": "G" * 128},
        {"alg": "ed25519", "key_id": TABLE.key_id, "value": "A" * 128},
        {"alg": "ed25519", "key_id": TABLE.key_id, "value": "٣" * 128},  # Arabic-Indic digits
        {"alg": "ed25519", "key_id": TABLE.key_id, "value": "0" * 126 + "\ud800"},
        {"alg": "ed25519", "key_id": "ключ", "value": "0" * 128},
        {"alg": "ed25519", "key_id": 7, "value": "0" * 128},
        {"alg": "ed25519", "key_id": TABLE.key_id, "value": 12},
        {"alg": "ed25519", "key_id": TABLE.key_id, "value": "0" * 128, "x": 1},
    ],
)
def test_a_malformed_signature_is_refused(sig: Any) -> None:
    message = {**_envelope(), "sig": sig}
    assert _refused(message) == "malformed_signature"
    if isinstance(sig, dict) and isinstance(sig.get("value"), str) and "\ud800" in sig["value"]:
        return  # no UTF-8 bytes exist for a lone surrogate
    assert _refused(json.dumps(message).encode()) == "malformed_signature"


def test_a_well_formed_wrong_signature_is_refused() -> None:
    sig = {"alg": "ed25519", "key_id": TABLE.key_id, "value": "0" * 128}
    assert _refused({**_envelope(), "sig": sig}) == "bad_signature"


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe{}",
        '{"a": 1}'.encode("utf-16"),
        b"[1, 2]",
        b"not json",
        b"[" * 100_000,
        b'{"seq": 1, "seq": 2}',
    ],
)
def test_what_is_no_json_object_is_malformed(raw: bytes) -> None:
    assert _refused(raw) == "malformed"


def test_a_member_named_twice_is_refused_even_when_signed() -> None:
    """Which copy would the signature vouch for? A parser keeping the first sees another seq."""
    data = TABLE.sign(_envelope(7))
    doubled = data[:-1] + b',"seq":999}'
    assert _refused(doubled) == "malformed"


def test_a_lone_surrogate_in_a_parsed_message_is_malformed() -> None:
    data = json.loads(TABLE.sign(_envelope()))
    data["payload"]["note"] = "\ud800"
    assert _refused(data) == "malformed"


def test_a_reply_is_signed_too() -> None:
    reply = {"ok": True, "error": None, "request_id": "r-1", "data": {"x": 1}}
    data = TABLE.sign(reply)
    assert verify_signed(data, KEYS).message == reply
    with pytest.raises(FeedSignatureError):
        verify_signed(_edit(data, ok=False), KEYS)


def test_keys_and_their_ids() -> None:
    line = public_key_line(TABLE.public_key)
    assert parse_public_key(line) == TABLE.public_key
    assert parse_public_key(line.split()[1]) == TABLE.public_key
    assert key_id(parse_public_key(line)) == TABLE.key_id
    assert keyring([line]) == KEYS
    for bad in ("ed25519", "ed25519 abc", "rsa " + "0" * 64, "0" * 63):
        with pytest.raises(ValueError):
            parse_public_key(bad)
    with pytest.raises(ValueError):
        key_id(b"short")


def test_the_contract_imports_nothing_of_the_table() -> None:
    """The pit imports this module: it must not pull in the daemon, the table or pydantic."""
    code = (
        "import sys, controller.feed_signature; "
        "print(sorted(m for m in sys.modules if m.startswith(('controller.', 'pydantic'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # feed_checkpoint is the contract's other half (standard library only; issue 32); sodium
    # reaches the system's libsodium with ctypes (issue 42).
    assert done.stdout.strip() == (
        "['controller.feed_checkpoint', 'controller.feed_signature', 'controller.sodium']"
    )


# --- the checkpoints' chain --------------------------------------------------------------------


def _cp(event_id: int, chain: str, prev: int | None = None, prev_chain: str | None = None) -> Any:
    return {
        "table_id": "PG-07",
        "event_id": event_id,
        "chain": chain,
        "made_at": f"t{event_id}",
        "prev_event_id": prev,
        "prev_chain": prev_chain,
    }


def test_a_checkpoint_follows_the_last_one_or_says_how_it_does_not() -> None:
    last = _cp(10, "a" * 64, 5, "e" * 64)
    assert checkpoint_link(None, _cp(3, "x" * 64)) is None  # nothing held yet
    assert checkpoint_link(last, _cp(20, "b" * 64, 10, "a" * 64)) is None
    assert checkpoint_link(last, {"payload": last}) is None  # the same one again
    problem = checkpoint_link(last, _cp(20, "b" * 64, 10, "c" * 64))
    assert problem is not None and problem.kind == "rewritten"
    problem = checkpoint_link(last, _cp(20, "b" * 64, 10, None))  # its row is gone
    assert problem is not None and problem.kind == "rewritten"
    problem = checkpoint_link(last, _cp(20, "b" * 64, 5, "e" * 64))
    assert problem is not None and problem.kind == "cut"
    problem = checkpoint_link(last, _cp(20, "b" * 64))
    assert problem is not None and problem.kind == "cut"
    problem = checkpoint_link(last, _cp(30, "b" * 64, 20, "d" * 64))
    assert problem is not None and problem.kind == "skipped"
    problem = checkpoint_link(last, _cp(9, "b" * 64, 5, "e" * 64))
    assert problem is not None and problem.kind == "backwards"
    problem = checkpoint_link(last, _cp(10, "f" * 64, 5, "e" * 64))
    assert problem is not None and problem.kind == "backwards"
