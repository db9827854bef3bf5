"""What the pit checks of every MQTT message before any of it reaches the database (issue 30).

A message is judged alone: bounded size, then strict UTF-8, then bounded nesting (counted on
the text, before the JSON parser sees it), then JSON without NaN or Infinity, then every value:
integers within ±2^53, no NUL and no lone surrogate in any string or key, then the envelope,
its ``time`` (ISO 8601 with a zone), and the payload against its schema. Whatever fails raises
:class:`Refused` with a one-line reason; the store keeps it as a reject (escaped and bounded by
:func:`escaped`) and the message is acknowledged like any other.

Then the signature (``controller.feed_signature.verify_envelope``) under the keys registered for
the table whose topic it came on (``pit.keys``), before any other use of the message: the store
sees only ``Verified.message``. An unsigned, forged, altered, another table's or an unknown key's
message is refused with the kind of record alarm it raises (:data:`SIGNATURE_ALARMS`).

What it does not protect against: a well-formed, well-signed message with false content (a
table host that lies before signing, or a key stolen off a table); that is what the record
checks are for, as far as they go (docs/pit.md "What the pit can prove").
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ValidationError

from controller.feed_signature import (
    SIG_FIELD,
    FeedSignatureError,
    key_id,
    public_bytes,
    verify_envelope,
)
from controller.messages import (
    AlarmAckPayload,
    AlarmPayload,
    CheckpointPayload,
    DevicePayload,
    Envelope,
    PlayerPayload,
    ProtectionPayload,
    RoundPayload,
    StatusPayload,
)
from pit import sodium

#: The payload model of each schema the feed carries (version 1).
PAYLOADS: dict[str, type[BaseModel]] = {
    m.SCHEMA: m
    for m in (
        RoundPayload,
        PlayerPayload,
        AlarmPayload,
        AlarmAckPayload,
        ProtectionPayload,
        CheckpointPayload,
        DevicePayload,
        StatusPayload,
    )
}

#: A message larger than this is refused unread (a round of seven seats is about 4 KB).
MAX_BYTES = 256 * 1024
#: Nesting deeper than this is refused before parsing (the feed's messages nest about 6 deep).
MAX_DEPTH = 32
#: Integers beyond ±2^53 are refused (a seq, a round number, an amount: none comes near).
MAX_INT = 2**53
#: How much of a refused message a reject keeps, and of its reason and topic.
REJECT_BODY = 16 * 1024
REJECT_REASON = 500
REJECT_TOPIC = 300

# A string literal (an unterminated one runs to the end: linear, never backtracking) or a bracket.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\Z)', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")
# What in a JSON text can become a value the walk refuses: 16+ digits (an integer beyond 2^53),
# a 3-digit exponent (infinity), a NUL or surrogate escape (a raw NUL or control character is
# not JSON, and strict UTF-8 has no surrogates). A text without any is not walked.
_SUSPECT = re.compile(r"\d{16,}|[eE][+-]?\d{3,}|\\u0000|\\u[dD][89a-fA-F]")
# For the fast path (:func:`_fast`), on canonical bytes (no spaces, no backslash: the fast path
# takes none): an integer of 16 digits or more where a number starts (after ``:``, ``,`` or
# ``[``; a hex digest's run of digits inside a string is not one). orjson itself refuses NaN,
# Infinity and a number that overflows to infinity.
_FAST_BIG_INT = re.compile(rb"[:,\[]-?\d{16}")
_NOT_BRACKETS_BYTES = bytes(b for b in range(256) if b not in b"[]{}")
#: A message as ``FeedSigner.sign`` writes it ends with its ``sig``, as the last member: the
#: fast path cuts the signature and the bytes it covers with this (so does ``bench/pit.py``).
SIG_TAIL = re.compile(
    rb',"sig":\{"alg":"ed25519","key_id":"([\x21\x23-\x5b\x5d-\x7e]{1,64})",'
    rb'"value":"([0-9a-f]{128})"\}\}\Z'
)


#: The record alarm each signature failure raises on the table of the topic it came on (an
#: unknown key: ``key_changed`` when the table has a registered key, else ``key_unregistered``).
SIGNATURE_ALARMS: dict[str, str | None] = {
    "malformed": None,
    "unsigned": "unsigned",
    "malformed_signature": "forged",
    "bad_signature": "forged",
    "wrong_table": "wrong_table",
}


#: A table's registered feed keys by key id, or None for a table not registered.
KeysOf = Callable[[str], Mapping[str, Ed25519PublicKey] | None]


class _Duplicate(ValueError):
    """A JSON object naming a member twice (json.loads would keep the last silently)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate("a JSON object names a member twice")
    return out


class Refused(Exception):
    """A message the pit does not take as the table's: ``reason`` says why, in one line."""

    def __init__(self, reason: str, kind: str | None = None, key_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        #: a record alarm's kind when the refusal is a finding about the table, else None
        self.kind = kind
        #: refused only because the key that signed it is not registered for the table: its id
        #: (the message waits for that key: ``pit.awaiting``)
        self.key_id = key_id


@dataclass(frozen=True, slots=True)
class Message:
    """A message that passed every check: its envelope's fields and its validated payload."""

    table_id: str
    schema: str
    msg_id: str
    seq: int
    time: datetime
    replayed: bool
    payload: BaseModel
    text: str
    data: dict[str, Any]


def escaped(raw: bytes | str, limit: int) -> str:
    """Text fit for any database and any log line: at most ``limit`` characters of ``raw``
    (bytes read as UTF-8), every byte that is not UTF-8 as ``\\xNN``, every control character,
    NUL and lone surrogate as ``\\xNN`` / ``\\uNNNN``."""
    text = raw[: limit * 4].decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
    out = []
    for ch in text[:limit]:
        code = ord(ch)
        if ch in "\n\t" or (ch.isprintable() and not 0xD800 <= code <= 0xDFFF):
            out.append(ch)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)[:limit]


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON ``text`` nests deeper than ``limit``, counted without parsing it."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = 0
    for ch in brackets:
        if ch in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse(payload: bytes, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``payload``, or :class:`Refused`; every value checked (module text)."""
    if len(payload) > max_bytes:
        raise Refused(f"{len(payload)} bytes: larger than {max_bytes}")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"not UTF-8 (byte {exc.start})") from None
    if too_deep(text, max_depth):
        raise Refused(f"nested deeper than {max_depth}")
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except _Duplicate:
        raise Refused("a JSON object names a member twice (which one was signed?)") from None
    except (ValueError, RecursionError):
        raise Refused("not JSON") from None
    problem = value_problem(data, "") if _SUSPECT.search(text) else None
    if problem is not None:
        raise Refused(problem)
    return data


def value_problem(value: Any, where: str) -> str | None:
    """Why a parsed JSON value cannot be stored as it is, or None."""
    if isinstance(value, str):
        return (
            f"{where or 'a string'}: a NUL or a lone surrogate" if _BAD_TEXT.search(value) else None
        )
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if -MAX_INT <= value <= MAX_INT else f"{where or 'a number'}: out of range"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where or 'a number'}: not finite"
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        name = f"{where}.{key}" if where else str(key)
        if isinstance(key, str) and _BAD_TEXT.search(key):
            return f"{where or 'an object'}: a key with a NUL or a lone surrogate"
        problem = value_problem(item, name[:80])
        if problem is not None:
            return problem
    return None


def envelope_problem(data: Any) -> str | None:
    """Why ``data`` is not a feed message's envelope (``controller.messages.Envelope``, the
    model the table's own :func:`~controller.messages.envelope` writes), or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    try:
        Envelope.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the envelope"
        return f"no envelope: {escaped(where, 40)}: {escaped(first['msg'], 120)}"
    return None


def claimed_time(text: str) -> datetime:
    """The envelope's ``time``: ISO 8601 with its zone, or :class:`Refused`."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise Refused(f"time {escaped(text, 40)!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        raise Refused(f"time {escaped(text, 40)!r} has no zone")
    return when


def signed(data: Any, topic_table: str, keys_of: KeysOf) -> dict[str, Any]:
    """The message ``data`` without its ``sig`` if the keys registered for the table of its
    topic (``keys_of(topic_table)``; None: not registered) vouch for it, signed for that table;
    else :class:`Refused` with its record alarm's kind (:data:`SIGNATURE_ALARMS`)."""
    if not isinstance(data, dict):
        raise Refused("not a JSON object")
    keys = keys_of(topic_table)
    try:
        return verify_envelope(data, keys or {}, table_id=topic_table).message
    except FeedSignatureError as exc:
        if exc.reason != "unknown_key":
            kind = SIGNATURE_ALARMS.get(exc.reason, "forged")
            raise Refused(f"{exc.reason}: {escaped(exc.detail, 200)}", kind) from None
    raw_kid: str | None = str(data[SIG_FIELD].get("key_id"))
    kid = escaped(str(raw_kid), 64)
    if kid != raw_kid:
        raw_kid = None  # not a key id a keys file could name: nothing to wait for
    table = escaped(topic_table, 64)
    named = data.get("table_id")
    if isinstance(named, str) and named != topic_table:
        other = keys_of(named)
        with contextlib.suppress(FeedSignatureError):
            verify_envelope(data, other or {}, table_id=named)
            raise Refused(
                f"wrong_table: {escaped(named, 64)}'s own message, on {table}'s topic",
                "wrong_table",
            )
    if keys is None:
        raise Refused(
            f"key_unregistered: {table} signs with {kid}, which the pit has no line for: "
            f"register it ([record] feed_keys_file) once paigow-table feed-key show on "
            f"{table} prints that key id",
            "key_unregistered",
            raw_kid,
        )
    raise Refused(
        f"key_changed: {table} signs with {kid}, not with its registered key "
        f"({', '.join(sorted(keys))}): a new key is registered by the casino, not by the table",
        "key_changed",
        raw_kid,
    )


def _nests_deeper(text: bytes, limit: int) -> bool:
    """Whether a JSON ``text`` without a backslash (so every ``"`` opens or closes a string)
    nests deeper than ``limit``: its brackets outside strings, each round of removing the
    innermost pairs one level less; in C, bytes at a time."""
    left = b"".join(text.split(b'"')[::2]).translate(None, _NOT_BRACKETS_BYTES)
    left = left.replace(b"[", b"{").replace(b"]", b"}")
    for _ in range(limit):
        if not left:
            return False
        left = left.replace(b"{}", b"")
    return bool(left)


def _fast(
    payload: bytes, topic_table: str, keys_of: KeysOf, max_depth: int
) -> dict[str, Any] | None:
    """The message without its ``sig`` when ``payload`` is exactly what ``FeedSigner.sign``
    writes (canonical JSON, ``sig`` last) and that signature, over exactly those bytes, checks
    under a key registered for ``topic_table``, for that table; None for anything else, which
    the strict path (:func:`parse`, :func:`signed`) then judges, with its reasons. Whatever the
    strict path refuses goes there: an integer beyond 2^53 (:data:`_FAST_BIG_INT`), any escape
    (a NUL, a surrogate), NaN or Infinity (orjson refuses them), a member twice (the canonical
    re-serialization would differ), nesting deeper than ``max_depth``. One C parse instead of
    a Python one, no Python walk."""
    tail = SIG_TAIL.match(payload, max(0, payload.rfind(b',"sig":{')))
    if tail is None or b"\\" in payload or _FAST_BIG_INT.search(payload) is not None:
        return None
    signed_bytes = payload[: tail.start()] + b"}"
    try:
        data = orjson.loads(signed_bytes)
    except orjson.JSONDecodeError:
        return None
    if (
        not isinstance(data, dict)
        or SIG_FIELD in data
        or data.get("table_id") != topic_table
        or orjson.dumps(data, option=orjson.OPT_SORT_KEYS) != signed_bytes
    ):
        return None
    kid = tail.group(1).decode("ascii")
    key = (keys_of(topic_table) or {}).get(kid)
    if key is None:
        return None
    raw = _raw_key(kid, key)
    if raw is None:
        return None
    signature = bytes.fromhex(tail.group(2).decode("ascii"))
    if FAST_VERIFY is not None:
        if not FAST_VERIFY(raw, signature, signed_bytes):
            return None
    else:
        try:
            key.verify(signature, signed_bytes)
        except InvalidSignature:
            return None
    if _nests_deeper(signed_bytes, max_depth):
        return None
    return data


#: The fast path's signature check: libsodium's (``pit.sodium``), or None where it is not
#: installed (then ``cryptography``'s).
FAST_VERIFY = sodium.verifier()
#: Each key id's registered key and its raw bytes (the key object kept: a keys file read again
#: makes new ones, which replace it): no serialization and no SHA-256 a message.
_RAW_KEYS: dict[str, tuple[Ed25519PublicKey, bytes]] = {}


def _raw_key(kid: str, key: Ed25519PublicKey) -> bytes | None:
    """The raw bytes of ``key`` if its key id is ``kid``, else None."""
    kept = _RAW_KEYS.get(kid)
    if kept is not None and kept[0] is key:
        return kept[1]
    try:
        raw = public_bytes(key)
    except Exception:  # not an Ed25519 key as cryptography makes them
        return None
    if key_id(raw) != kid:
        return None
    _RAW_KEYS[kid] = (key, raw)
    return raw


def read(
    payload: bytes,
    topic_table: str,
    keys_of: KeysOf,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
) -> Message:
    """The message in ``payload`` sent on ``topic_table``'s topic, its signature checked
    against the keys ``keys_of`` that table (:func:`signed`), or :class:`Refused`. A message
    exactly as the table signs it takes the fast path (:func:`_fast`), anything else the strict
    one: the same verdicts, the same reasons."""
    if len(payload) > max_bytes:
        raise Refused(f"{len(payload)} bytes: larger than {max_bytes}")
    data = _fast(payload, topic_table, keys_of, max_depth)
    if data is None:
        parsed = parse(payload, max_bytes=max_bytes, max_depth=max_depth)
        data = signed(parsed, topic_table, keys_of)
    problem = envelope_problem(data)
    if problem is not None:
        raise Refused(problem)
    table_id, schema = data["table_id"], data["schema"]
    if topic_table != table_id:
        raise Refused(
            f"on table {escaped(topic_table, 64)}'s topic, the message says {escaped(table_id, 64)}"
        )
    model = PAYLOADS.get(schema)
    if model is None or data.get("version") != 1:
        raise Refused(
            f"unknown schema {escaped(schema, 64)} v{escaped(str(data.get('version')), 20)}"
        )
    when = claimed_time(data["time"])
    try:
        body = model.model_validate(data["payload"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Refused(f"{schema}: {escaped(where, 80)}: {escaped(first['msg'], 200)}") from None
    return Message(
        table_id=table_id,
        schema=schema,
        msg_id=data["msg_id"],
        seq=data["seq"],
        time=when,
        replayed=bool(data.get("replayed")),
        payload=body,
        text=payload.decode("utf-8"),
        data=data,
    )
