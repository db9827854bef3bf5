"""The signed feed, as the table and the pit share it (docs/mqtt.md "The signed feed"): pure
functions of bytes and keys, importing nothing of the table but the standard library, libsodium
(``controller.sodium``) and the ``cryptography`` package, so the pit can import this module
without the daemon. The table signs through libsodium where it is installed and loads
``cryptography`` only without it (issue 42: 7 MB of a table's memory); a key or a verification
by ``cryptography``'s types imports it when it is asked for.

Every message the table publishes (the envelopes on ``round``, ``dead``, ``player``, ``alarm``,
``alarm_ack``, ``device/<name>``, ``status`` with its last will, ``checkpoint``, ``protection``,
and the replies to commands) carries ``"sig"``::

    "sig": {"alg": "ed25519", "key_id": "ed25519:<32 hex>", "value": "<128 hex>"}

``value`` is the Ed25519 signature, under the table's own key, of ``canonical(message without
"sig")``: the JSON with keys sorted, no spaces, non-ASCII kept, UTF-8 (Python's
``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)``). So it covers every
other field of the envelope: ``schema``, ``version``, ``msg_id``, ``table_id``, ``seq``, ``time``,
``replayed`` and ``payload``. ``key_id`` is ``key_id(public key)``: ``ed25519:`` and the first
32 hex digits of the SHA-256 of the raw 32-byte public key, like an SSH host key's fingerprint.

A checkpoint (``paigow.checkpoint``) also names the checkpoint before it (``prev_event_id``,
``prev_chain``): ``checkpoint_link`` checks a new one against the last one a receiver holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from controller import sodium

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

# The checkpoints' link and HMAC bytes are part of the feed's contract; they live in a module
# without the Ed25519 library (the journal checks them at every start, MQTT or not).
from controller.feed_checkpoint import CHECKPOINT_FIELDS as CHECKPOINT_FIELDS
from controller.feed_checkpoint import CHECKPOINT_LINK_FIELDS as CHECKPOINT_LINK_FIELDS
from controller.feed_checkpoint import BrokenLink as BrokenLink
from controller.feed_checkpoint import checkpoint_hmac_bytes as checkpoint_hmac_bytes
from controller.feed_checkpoint import checkpoint_link as checkpoint_link

ALG: Final = "ed25519"
SIG_FIELD: Final = "sig"
KEY_ID_PREFIX: Final = "ed25519:"
_SIGNATURE_HEX: Final = re.compile(r"[0-9a-f]{128}")
_PUBLIC_HEX: Final = re.compile(r"[0-9A-Fa-f]{64}")

Reason = Literal[
    "malformed", "unsigned", "malformed_signature", "unknown_key", "bad_signature", "wrong_table"
]


class FeedSignatureError(ValueError):
    """A message the feed's signature does not vouch for. ``reason`` is one of ``Reason``:
    ``malformed`` (not a JSON object of text), ``unsigned`` (no ``sig``), ``malformed_signature``
    (``sig`` is not ``{"alg": "ed25519", "key_id": str, "value": 128 lower-case hex digits}``),
    ``unknown_key`` (no registered key has that ``key_id``), ``bad_signature`` (the key did not
    sign these bytes), ``wrong_table`` (genuine, but for another table than expected)."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: Reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Verified:
    """A message whose signature checked: the key that signed it and the message without
    ``sig`` (use this, not a second parse of the bytes)."""

    key_id: str
    message: dict[str, Any]


# --- keys --------------------------------------------------------------------------------------


def public_bytes(public_key: Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of a public key."""
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey | bytes) -> str:
    """The key id of a public key (or its raw 32 bytes): ``ed25519:`` and 32 hex digits of its
    SHA-256."""
    raw = public_key if isinstance(public_key, bytes) else public_bytes(public_key)
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key has 32 bytes, not {len(raw)}")
    return KEY_ID_PREFIX + hashlib.sha256(raw).hexdigest()[:32]


def public_key_line(public_key: Ed25519PublicKey) -> str:
    """How a public key is registered with the pit: ``ed25519 <64 hex digits>``."""
    return f"{ALG} {public_bytes(public_key).hex()}"


def parse_public_key(text: str) -> Ed25519PublicKey:
    """A public key written as ``public_key_line`` does (or its 64 hex digits alone);
    ValueError says what was expected."""
    words = text.split()
    if len(words) == 2 and words[0] == ALG:
        words = words[1:]
    if len(words) != 1 or not _PUBLIC_HEX.fullmatch(words[0]):
        raise ValueError("expected 'ed25519 <64 hex digits>' (paigow-table feed-key show)")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    return Ed25519PublicKey.from_public_bytes(bytes.fromhex(words[0]))


def keyring(public_keys: Iterable[Ed25519PublicKey | str]) -> dict[str, Ed25519PublicKey]:
    """The keys ``verify_envelope`` takes, by key id: each a public key or its registered line
    (``parse_public_key``)."""
    keys = (parse_public_key(k) if isinstance(k, str) else k for k in public_keys)
    return {key_id(k): k for k in keys}


# --- signing -----------------------------------------------------------------------------------


def canonical(message: Mapping[str, Any]) -> bytes:
    """The bytes a signature covers: ``message`` without ``sig``, keys sorted, no spaces, UTF-8.
    ValueError (UnicodeEncodeError) for a string with a lone surrogate, which nobody signed."""
    unsigned = {k: v for k, v in message.items() if k != SIG_FIELD}
    text = json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


class FeedSigner:
    """The table's signing key: it signs every message the table publishes. Made from a
    ``cryptography`` private key or from the key's 32 bytes (``seed``, what the key file
    holds); it signs through libsodium where the system has it, else through ``cryptography``
    (the same signatures: Ed25519's are deterministic)."""

    def __init__(
        self, private_key: Ed25519PrivateKey | None = None, *, seed: bytes | None = None
    ) -> None:
        if seed is None:
            if private_key is None:
                raise TypeError("FeedSigner needs a private key or its seed")
            seed = private_key.private_bytes_raw()
        made = sodium.signer(seed)
        if made is not None:
            self.public_raw, self._sign = made
        else:
            if private_key is None:
                from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

                private_key = Ed25519PrivateKey.from_private_bytes(seed)
            self._sign = private_key.sign
            self.public_raw = public_bytes(private_key.public_key())
        self.key_id = key_id(self.public_raw)

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The public key as ``cryptography``'s type (to register it, to verify with it)."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        return Ed25519PublicKey.from_public_bytes(self.public_raw)

    def signature(self, data: bytes) -> dict[str, str]:
        """The ``sig`` object of ``data`` (canonical bytes)."""
        return {"alg": ALG, "key_id": self.key_id, "value": self._sign(data).hex()}

    def sign(self, message: Mapping[str, Any]) -> bytes:
        """``message`` with its ``sig``, as the bytes to publish: the canonical JSON of the
        message with ``sig`` as its last member."""
        return self.sign_canonical(canonical(message))

    def sign_canonical(self, data: bytes) -> bytes:
        """:meth:`sign` of a message given as its canonical bytes (:func:`canonical`'s
        output, which the caller vouches for: other bytes make a signature nobody verifies)."""
        sig = json.dumps(self.signature(data), separators=(",", ":")).encode("ascii")
        if data == b"{}":
            return b'{"sig":' + sig + b"}"
        return data[:-1] + b',"sig":' + sig + b"}"


# --- verifying ---------------------------------------------------------------------------------


def _invalid_signature() -> type[Exception]:
    from cryptography.exceptions import InvalidSignature

    return InvalidSignature


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise FeedSignatureError("malformed", "a JSON object names a member twice")
    return out


def _parsed(message: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
    """The message as a JSON object; a member named twice is refused (which copy would the
    signature vouch for?)."""
    if isinstance(message, Mapping):
        return dict(message)
    try:
        # UTF-8 only: json.loads would take UTF-16 and UTF-32 bytes as well.
        text = message.decode("utf-8") if isinstance(message, bytes) else message
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError:
        raise FeedSignatureError("malformed", "not UTF-8") from None
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, FeedSignatureError):
            raise
        raise FeedSignatureError("malformed", f"not JSON: {str(exc)[:100]}") from None
    if not isinstance(data, dict):
        raise FeedSignatureError("malformed", f"not a JSON object but {type(data).__name__}")
    return data


def _signature(data: Mapping[str, Any]) -> tuple[str, bytes]:
    """The ``sig`` member's key id and signature bytes; FeedSignatureError if it is missing or
    not exactly ``{"alg": "ed25519", "key_id": str, "value": 128 hex digits}``."""
    if SIG_FIELD not in data:
        raise FeedSignatureError("unsigned", "the message has no sig")
    sig = data[SIG_FIELD]
    if not isinstance(sig, dict) or set(sig) != {"alg", "key_id", "value"}:
        raise FeedSignatureError("malformed_signature", "sig must be {alg, key_id, value}")
    if sig["alg"] != ALG:
        shown = repr(sig["alg"][:32]) if isinstance(sig["alg"], str) else "not a string"
        raise FeedSignatureError("malformed_signature", f"sig.alg is {shown}, expected 'ed25519'")
    value, kid = sig["value"], sig["key_id"]
    if not isinstance(kid, str) or not kid.isascii() or not 0 < len(kid) <= 64:
        raise FeedSignatureError("malformed_signature", "sig.key_id must be ASCII text, 1-64")
    if not isinstance(value, str) or not _SIGNATURE_HEX.fullmatch(value):
        raise FeedSignatureError("malformed_signature", "sig.value must be 128 lower-case hex")
    return kid, bytes.fromhex(value)


def verify_signed(
    message: bytes | str | Mapping[str, Any], keys: Mapping[str, Ed25519PublicKey]
) -> Verified:
    """Check any signed message of the table (an envelope or a reply) against ``keys`` (by key
    id, as ``keyring`` makes them): the ``Verified`` message, or FeedSignatureError."""
    data = _parsed(message)
    kid, signature = _signature(data)
    key = keys.get(kid)
    if key is None or key_id(key) != kid:
        raise FeedSignatureError("unknown_key", f"no registered key has the id {kid!r}")
    try:
        signed = canonical(data)
    except (ValueError, TypeError, RecursionError):
        raise FeedSignatureError(
            "malformed", "the message cannot be written as UTF-8 JSON"
        ) from None
    try:
        key.verify(signature, signed)
    except _invalid_signature():
        raise FeedSignatureError(
            "bad_signature", f"not signed by {kid}: changed after signing, or forged"
        ) from None
    del data[SIG_FIELD]
    return Verified(kid, data)


def verify_envelope(
    message: bytes | str | Mapping[str, Any],
    keys: Mapping[str, Ed25519PublicKey],
    *,
    table_id: str | None = None,
) -> Verified:
    """Check one feed message (its bytes, or its parsed JSON) against the keys registered for
    the table it came from (``keyring``). With ``table_id``, a genuine message naming another
    table is refused too (``wrong_table``). Returns the ``Verified`` envelope; raises
    FeedSignatureError with its ``reason`` otherwise. It checks the signature, not the
    envelope's other fields (their types and ranges are the receiver's to check)."""
    verified = verify_signed(message, keys)
    if table_id is not None and verified.message.get("table_id") != table_id:
        named = verified.message.get("table_id")
        shown = repr(named[:64]) if isinstance(named, str) else "no table"
        raise FeedSignatureError("wrong_table", f"signed for {shown}, expected {table_id!r}")
    return verified


# --- checkpoints -------------------------------------------------------------------------------
