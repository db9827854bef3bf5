"""What goes over MQTT, apart from the client: message bytes from the outbox, commands parsed
and refused, replies, and the TLS context the publisher and ``monitor`` share."""

from __future__ import annotations

import json
import socket
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.config.readers import tls_context as tls_context
from controller.feed_signature import FeedSigner
from controller.journal import OutboxRow
from controller.messages import (
    COMMAND_KINDS,
    AcknowledgeAlarm,
    Command,
    PlayerSetting,
    Signature,
    VoidRound,
    parse_command,
)
from controller.mqtt.signing import TABLE_FIELD, CommandVerifier, SignatureRefused, json_type

#: Commands larger than this are refused unread (bytes).
COMMAND_SIZE_LIMIT = 16 * 1024
#: paho leaves Nagle on: a PUBACK followed by a small publish then waits ~40 ms for a TCP ACK.
NODELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)


class ReplyPayload(BaseModel):
    """The answer to a command, on the MQTT 5 response topic or ``<prefix>reply/<command>``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ok: bool
    error: str | None = Field(description="why the command failed or was refused; null if ok")
    request_id: str | None = Field(description="the command's request_id, echoed")
    data: dict[str, Any] | None = Field(description="the command's result, e.g. the status")
    sig: Signature | None = Field(
        None, description='the table\'s signature (docs/mqtt.md "The signed feed"); always set'
    )


class CommandRefused(Exception):
    """A command that never reached the table (malformed, oversized, unknown, not ours)."""

    def __init__(self, error: str, request_id: str | None = None, reason: str = "invalid") -> None:
        # The words go to the log, the journal and the reply: a lone surrogate (from a body's
        # "\ud800") is written as its escape, never carried (it has no UTF-8; pydantic and
        # SQLite would raise on it).
        error = error.encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(error)
        self.error = error
        self.request_id = request_id if request_id is None or _is_text(request_id) else None
        # invalid, signature, round, person, rate_limited, malformed (journaled)
        self.reason = reason


# --- wire helpers ------------------------------------------------------------------------------


def wire_payload(row: OutboxRow, signer: FeedSigner) -> bytes:
    """The bytes to publish for an outbox row: the stored envelope, with ``"replayed": true``
    when the row was pending at a (re)connect, signed by the table (docs/mqtt.md "The signed
    feed"). Signed here, as it leaves, so signing writes nothing to disk and ``replayed`` is
    covered too; Ed25519 is deterministic, so a resend of the same bytes has the same ``sig``."""
    if row.canonical and not row.replay:
        return signer.sign_canonical(row.payload)
    data = json.loads(row.payload)
    if row.replay and isinstance(data, dict) and "replayed" in data:
        data["replayed"] = True
    return signer.sign(data)


def reply_bytes(reply: ReplyPayload, signer: FeedSigner) -> bytes:
    """A reply as published: its JSON with the table's ``sig`` (its ``request_id`` ties it to
    the command it answers)."""
    return signer.sign(reply.model_dump(mode="json", exclude={"sig"}))


def _is_text(value: str) -> bool:
    """Whether ``value`` is Unicode text, i.e. has a UTF-8 encoding (no lone surrogate)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _all_text(value: object) -> bool:
    """Whether every string in a JSON value, keys included, is text (no lone surrogate). JSON
    may write a lone surrogate as ``"\\ud800"``, and json.loads keeps it: such a string can be
    neither journaled, nor replied, nor signed. Iterative: any depth json.loads accepts."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not _is_text(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _validation_summary(exc: ValidationError, kind: str) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        loc = [str(p) for p in error["loc"]]
        if loc and loc[0] == kind:  # the discriminated union puts the tag first
            loc = loc[1:]
        parts.append(f"{'.'.join(loc) or '(body)'}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_command_message(
    prefix: str,
    topic: str,
    payload: bytes,
    verifier: CommandVerifier | None = None,
    *,
    table_id: str | None = None,
) -> Command:
    """Validate one message on ``<prefix>cmd/<kind>``: ours, at most COMMAND_SIZE_LIMIT bytes, a
    known kind, a JSON object (empty means ``{}``) whose ``kind``, if given, is the topic's, and,
    with a ``verifier``, signed for this table (controller/mqtt/signing.py). A ``table_id`` in
    the body, signed or not, must be this table's (``table_id``, else the verifier's). A
    ``round_id`` is checked by the table, where the command acts
    (controller/table/scope.py).

    Raises CommandRefused with the reason (and the body's request_id when it has one).
    """
    command, _ = parse_signed_command(prefix, topic, payload, verifier, table_id=table_id)
    return command


def parse_signed_command(
    prefix: str,
    topic: str,
    payload: bytes,
    verifier: CommandVerifier | None = None,
    *,
    table_id: str | None = None,
) -> tuple[Command, str | None]:
    """``parse_command_message``'s command and the id of the key that signed it (None:
    unsigned), to journal with it."""
    name = _command_name(prefix, topic)
    body = _decode_body(payload)
    request_id = _body_request_id(body)
    fields = _command_body(name, body, request_id)
    key_id: str | None = None
    if verifier is not None:
        signed_by = fields.get("key_id") if "signature" in fields else None
        try:
            fields = verifier.verify(name, fields)
        except SignatureRefused as exc:
            raise CommandRefused(f"refused: {exc}", request_id, "signature") from None
        key_id = signed_by if isinstance(signed_by, str) else None  # verified: genuine
        if table_id is None:
            table_id = verifier.table_id
    fields = _addressed_here(fields, table_id, request_id)
    try:
        command = parse_command({**fields, "kind": name})
    except ValidationError as exc:
        raise CommandRefused(_validation_summary(exc, name), request_id) from None
    return command, key_id


def check_person(command: Command, supervisors: frozenset[str] | None) -> None:
    """Refuse (CommandRefused, reason ``person``) a command naming a supervisor (``by``: an
    acknowledgement, a void, a correction) who is not in the table's own supervisors file. The
    signature says which system sent it, not who stood behind it: the table checks the person
    against its own list. ``supervisors`` None: the table has no supervisors file, and a name
    is taken as typed (docs/mqtt.md)."""
    if supervisors is None or not isinstance(command, AcknowledgeAlarm | VoidRound | PlayerSetting):
        return
    by = command.by
    if by is None or by in supervisors:
        return
    raise CommandRefused(
        f"refused: {by[:64]!r} is not a supervisor of this table (its supervisors_file): "
        f"a {command.kind} must name one by badge",
        command.request_id,
        "person",
    )


def _command_name(prefix: str, topic: str) -> str:
    """The command kind ``<prefix>cmd/<kind>`` names; CommandRefused for another topic."""
    base = f"{prefix}cmd/"
    name = topic[len(base) :] if topic.startswith(base) else ""
    if not name or "/" in name:
        raise CommandRefused(f"not a command topic of this table: {topic[:200]!r}")
    return name


def _decode_body(payload: bytes) -> object:
    """The JSON a payload of at most COMMAND_SIZE_LIMIT bytes holds (empty means ``{}``);
    CommandRefused otherwise."""
    if len(payload) > COMMAND_SIZE_LIMIT:
        raise CommandRefused(
            f"command too large: {len(payload)} bytes (the limit is {COMMAND_SIZE_LIMIT})"
        )
    try:
        return json.loads(payload.decode("utf-8")) if payload.strip() else {}
    except UnicodeDecodeError:
        raise CommandRefused("expected UTF-8 JSON, got bytes that are not UTF-8") from None
    except (ValueError, RecursionError) as exc:
        raise CommandRefused(f"expected a JSON object: {str(exc)[:200]}") from None


def _body_request_id(body: object) -> str | None:
    """The body's request_id, to echo in a refusal: a short string of text, else None."""
    if not isinstance(body, dict):
        return None
    rid = body.get("request_id")
    return rid if isinstance(rid, str) and len(rid) <= 128 and _is_text(rid) else None


def _command_body(name: str, body: object, request_id: str | None) -> dict[str, Any]:
    """``body``, checked to be a command ``name`` may carry: a known kind, a JSON object of
    text whose ``kind``, if given, is ``name``; CommandRefused otherwise."""
    if name not in COMMAND_KINDS:
        raise CommandRefused(
            f"unknown command {name[:64]!r}: expected one of {', '.join(COMMAND_KINDS)}",
            request_id,
        )
    if not isinstance(body, dict):
        raise CommandRefused(f"expected a JSON object, got {type(body).__name__}", request_id)
    if not _all_text(body):
        raise CommandRefused(
            "expected UTF-8 JSON: a string holds a lone surrogate (\\ud800-\\udfff), which is "
            "not text",
            request_id,
        )
    kind = body.get("kind", name)
    if kind != name:
        shown = repr(kind[:64]) if isinstance(kind, str) else f"({json_type(kind)})"
        raise CommandRefused(
            f"the body's kind {shown} does not match the topic's {name!r}", request_id
        )
    return body


def _addressed_here(
    body: dict[str, Any], table_id: str | None, request_id: str | None
) -> dict[str, Any]:
    """``body`` without its ``table_id``, which must be ``table_id`` (when that is known);
    CommandRefused for another table's."""
    if TABLE_FIELD not in body or table_id is None:
        return body
    # An unsigned command may say which table it is for too: never another's.
    body = dict(body)
    named = body.pop(TABLE_FIELD)
    if named != table_id:
        shown = repr(named[:64]) if isinstance(named, str) else f"({json_type(named)})"
        raise CommandRefused(
            f"refused: addressed to table {shown}, this is table {table_id!r}", request_id
        )
    return body
