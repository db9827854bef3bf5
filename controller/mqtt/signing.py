"""Signed MQTT commands (docs/mqtt.md, "Signed commands"): HMAC-SHA256 with a key per
integration, a time window and replay protection, bound to one table and, for a command that
acts on a round, to that round.

A signed command's JSON body carries, beside the command's own fields, ``table_id`` (the table
it is for), ``key_id`` (which key), ``issued_at`` (UTC ISO 8601), a ``request_id`` unique to this
command, and ``signature``: the hex HMAC-SHA256, under the key, of the command's kind, a newline,
and the body without ``signature`` as canonical JSON (keys sorted, no spaces, UTF-8); so the
signature covers ``table_id``. A round-scoped command (``ROUND_SCOPED``) carries ``round_id`` too.
The table refuses, with a reply saying why: no signature, an unknown key, ``issued_at`` outside
the window, a wrong signature, no ``table_id`` or another table's (a command signed for one table
replayed to another that shares the key), a round-scoped command without ``round_id``, a request
id it has seen (journaled commands count, so replays are refused across restarts). Whether the
named round is the one the command would act on is the table's to say, when the command acts
(``controller/table/scope.py``). Read-only commands (``status_request``) may stay unsigned
(``unsigned_read_only``).

The keys file names each key's type (``read_keys``): ``key_id hmac-sha256 <secret hex>``, or, for
a casino that prefers public keys, ``key_id ed25519 <public key hex>``: the table then holds no
secret of that integration, and ``signature`` is the hex Ed25519 signature of the same bytes
(the ``cryptography`` package's implementation, imported only when such a key is configured).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from controller.clock import iso, utc_now

# The keys file is read where the config check reads it too (controller/config/readers.py).
from controller.config.readers import read_keys as read_keys

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

#: Commands that change nothing the table decided and only make it publish what it has (its
#: status; copies of messages it sent, within the resend budget): unsigned when
#: ``unsigned_read_only``, so a pit without a command key may probe and ask for lost seqs
#: without its refusals raising the table's command_refused alarm.
READ_ONLY = frozenset({"status_request"})
AUTH_FIELDS = ("key_id", "issued_at", "signature")
#: The body field naming the table a command is for; a signed command must carry it.
TABLE_FIELD = "table_id"
#: Commands that act on one round: signed, they must name it (``round_id``), and the table
#: refuses them unless it is the round they would act on. ``void_round`` and ``player_setting``
#: act on the table's newest round; ``enter_dice`` on the round being dealt, or, between deals,
#: on the next deal (then ``round_id`` is null). The others act on the table, not on a round:
#: seats and wagers stand until changed, an alarm is named by its own id.
ROUND_SCOPED = frozenset({"void_round", "player_setting", "enter_dice"})
#: Round-scoped commands whose ``round_id`` may be null (no round being dealt: the next deal).
ROUND_MAY_BE_NULL = frozenset({"enter_dice"})
#: A signature is hex digits (ASCII only: [0-9a-f] never matches another script's digits).
_HEX = re.compile(r"[0-9A-Fa-f]+")


class SignatureRefused(Exception):
    """The command's signature, key, time or request id is not acceptable."""


def canonical(kind: str, body: Mapping[str, Any]) -> bytes:
    """The bytes a command's signature covers: its kind, a newline, the body without
    ``signature`` as JSON with sorted keys and no spaces."""
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    text = json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{kind}\n{text}".encode()


def round_problem(kind: str, body: Mapping[str, Any]) -> str | None:
    """Why a signed ``kind`` with this body does not name its round, or None: a round-scoped
    command (ROUND_SCOPED) carries ``round_id``, a non-empty string (``enter_dice`` may say
    null: no round is being dealt, the dice are for the next deal)."""
    if kind not in ROUND_SCOPED:
        return None
    if "round_id" not in body:
        between = " (null between deals: the dice are for the next deal)"
        return (
            f"a signed {kind} needs the round_id of the round it acts on"
            f"{between if kind in ROUND_MAY_BE_NULL else ''}"
        )
    round_id = body["round_id"]
    if round_id is None and kind in ROUND_MAY_BE_NULL:
        return None
    if not isinstance(round_id, str) or not round_id:
        shown = "an empty string" if round_id == "" else json_type(round_id)
        return f"a signed {kind}'s round_id must name a round, not {shown}"
    return None


def sign(
    key: bytes | Ed25519PrivateKey,
    key_id: str,
    kind: str,
    body: Mapping[str, Any],
    issued_at: datetime,
    *,
    table_id: str | None = None,
) -> dict[str, Any]:
    """``body`` with ``table_id``, ``key_id``, ``issued_at`` and its ``signature`` (for
    integrators and tests): HMAC-SHA256 with a shared key, or Ed25519 with a private key.

    The table is ``table_id``, or the ``table_id`` the body already names. A command the table
    would refuse for what it names is not signed (ValueError): no table, two different tables,
    a round-scoped command without its ``round_id`` (``round_problem``)."""
    named = body.get(TABLE_FIELD)
    if table_id is None:
        table_id = named
    elif named is not None and named != table_id:
        raise ValueError(f"the body names table {named!r}, not {table_id!r}")
    if not isinstance(table_id, str) or not table_id:
        raise ValueError("a signed command names the table it is for: give its table_id")
    problem = round_problem(kind, body)
    if problem is not None:
        raise ValueError(problem)
    signed = {**body, TABLE_FIELD: table_id, "key_id": key_id, "issued_at": iso(issued_at)}
    data = canonical(kind, signed)
    if isinstance(key, bytes):
        signed["signature"] = hmac.new(key, data, hashlib.sha256).hexdigest()
    else:
        signed["signature"] = key.sign(data).hex()
    return signed


def _valid(key: bytes | Ed25519PublicKey, signature: str, data: bytes) -> bool:
    """Whether ``signature`` (hex digits, checked by the caller) signs ``data``. Bytes are
    compared, never str: hmac.compare_digest raises TypeError on a str that is not ASCII."""
    if isinstance(key, bytes):
        expected = hmac.new(key, data, hashlib.sha256).hexdigest().encode("ascii")
        return hmac.compare_digest(signature.encode("ascii"), expected)
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(bytes.fromhex(signature), data)
    except (InvalidSignature, ValueError):
        return False
    return True


def json_type(value: object) -> str:
    """A body value's JSON type, to say what came instead (never the value: it may be huge, or
    hold a lone surrogate that no journal or reply could carry)."""
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _command_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """A command's own fields: the body without the signature's fields and ``table_id``."""
    return {k: v for k, v in body.items() if k not in (*AUTH_FIELDS, TABLE_FIELD)}


def _signature_text(signature: object) -> str:
    """``signature`` if it is a string of hex digits; SignatureRefused otherwise."""
    if not isinstance(signature, str):
        raise SignatureRefused(f"signature must be a string, not {json_type(signature)}")
    if not _HEX.fullmatch(signature):
        raise SignatureRefused("signature must be hex digits (0-9, a-f)")
    return signature


def _signed_bytes(kind: str, body: Mapping[str, Any]) -> bytes:
    """The bytes the command's signature covers (``canonical``); SignatureRefused for a body
    that has none."""
    try:
        return canonical(kind, body)
    except UnicodeEncodeError:
        # "\ud800" in the JSON is a lone surrogate: no UTF-8, so nothing can have signed it.
        raise SignatureRefused("the body holds a lone surrogate (\\ud800-\\udfff)") from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise SignatureRefused(f"the body cannot be encoded: {type(exc).__name__}") from None


@dataclass
class CommandVerifier:
    """Checks signed commands for the table ``table_id``; remembers request ids for twice the
    window."""

    keys: Mapping[str, bytes | Ed25519PublicKey]
    window: float = 60.0
    unsigned_read_only: bool = True
    clock: Callable[[], datetime] = utc_now
    table_id: str = field(kw_only=True)
    _seen: OrderedDict[str, datetime] = field(default_factory=OrderedDict)

    def remember(self, request_ids: Iterable[tuple[str, datetime]]) -> None:
        """Request ids the journal holds from before a restart, with their times."""
        for request_id, at in request_ids:
            self._seen[request_id] = at

    def verify(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        """The command's own fields if it may run; SignatureRefused saying why otherwise.

        ``table_id`` is checked (a signed command must name this table; an unsigned read-only
        one may) and left out of the fields."""
        signature = body.get("signature")
        if signature is None:
            return self._unsigned(kind, body)
        key = self._key(body)
        now = self.clock()
        self._check_issued_at(body, now)
        request_id = body.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            raise SignatureRefused("a signed command needs a request_id")
        signature = _signature_text(signature)
        if not _valid(key, signature, _signed_bytes(kind, body)):
            raise SignatureRefused("wrong signature")
        # Genuine, so what it names was signed: the table and the round are the signer's.
        self._check_table(body)
        problem = round_problem(kind, body)
        if problem is not None:
            raise SignatureRefused(problem)
        self._forget(now)
        if request_id in self._seen:
            raise SignatureRefused(f"request_id {request_id[:64]!r} was seen before: a replay")
        self._seen[request_id] = now
        return _command_fields(body)

    def _unsigned(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        """An unsigned command's own fields if it may run unsigned (a read-only one, for this
        table); SignatureRefused otherwise."""
        if kind in READ_ONLY and self.unsigned_read_only:
            named = body.get(TABLE_FIELD, self.table_id)
            if named != self.table_id:
                shown = repr(named[:64]) if isinstance(named, str) else json_type(named)
                raise SignatureRefused(
                    f"addressed to table {shown}, this is table {self.table_id!r}"
                )
            return _command_fields(body)
        raise SignatureRefused("the command is not signed (signature, key_id, issued_at)")

    def _key(self, body: dict[str, Any]) -> bytes | Ed25519PublicKey:
        """The key the body's ``key_id`` names; SignatureRefused for none, or an unknown one."""
        key_id = body.get("key_id")
        if key_id is None:
            raise SignatureRefused("a signed command needs a key_id")
        if not isinstance(key_id, str):
            raise SignatureRefused(f"key_id must be a string, not {json_type(key_id)}")
        key = self.keys.get(key_id)
        if key is None:
            raise SignatureRefused(f"unknown key_id {key_id[:64]!r}")
        return key

    def _check_issued_at(self, body: dict[str, Any], now: datetime) -> None:
        """SignatureRefused unless the body's ``issued_at`` is a time within the window of
        ``now``."""
        issued_at = body.get("issued_at")
        if issued_at is None:
            raise SignatureRefused("a signed command needs an issued_at")
        if not isinstance(issued_at, str):
            raise SignatureRefused(
                f"issued_at must be an ISO 8601 string, not {json_type(issued_at)}"
            )
        try:
            issued = datetime.fromisoformat(issued_at)
        except ValueError:
            raise SignatureRefused("issued_at is not an ISO 8601 time") from None
        if issued.tzinfo is None:
            raise SignatureRefused("issued_at must carry its time zone (Z)")
        try:
            skew = abs((now - issued.astimezone(UTC)).total_seconds())
        except OverflowError:  # e.g. 0001-01-01T00:00:00+14:00 is before the first UTC date
            raise SignatureRefused("issued_at is out of range") from None
        if skew > self.window:
            raise SignatureRefused(
                f"issued_at is {skew:.0f} s from the table's clock (the window is "
                f"{self.window:g} s)"
            )

    def _check_table(self, body: dict[str, Any]) -> None:
        """SignatureRefused unless a genuine command's ``table_id`` names this table."""
        named = body.get(TABLE_FIELD)
        if named is None:
            raise SignatureRefused(
                f"a signed command names the table it is for: table_id (this is table "
                f"{self.table_id!r})"
            )
        if not isinstance(named, str):
            raise SignatureRefused(f"table_id must be a string, not {json_type(named)}")
        if named != self.table_id:
            raise SignatureRefused(
                f"signed for table {named[:64]!r}, this is table {self.table_id!r}"
            )

    def _forget(self, now: datetime) -> None:
        while self._seen:
            at = next(iter(self._seen.values()))
            if (now - at).total_seconds() <= 2 * self.window:
                return
            self._seen.popitem(last=False)
