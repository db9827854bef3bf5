"""JSON Schemas of everything on the MQTT feed, generated from the pydantic models.

    python -m controller.schemas --output docs/schemas          # write them
    python -m controller.schemas --output docs/schemas --check  # exit 1 if they are stale

One file per message: the envelope (``schema``, ``version``, ``msg_id``, ``table_id``, ``seq``,
``time``, ``replayed``, ``sig``) with its payload, named ``<schema>.v<version>.json``; one per
command body, ``command.<kind>.json`` (``kind`` optional: the topic names it); and
``reply.json``.
The files are committed (docs/schemas/) and a test checks they match the models.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model

from controller.messages import (
    AlarmAckPayload,
    AlarmPayload,
    CheckpointPayload,
    Command,
    DevicePayload,
    Payload,
    PlayerPayload,
    ProtectionPayload,
    RoundPayload,
    Signature,
    StatusPayload,
)

PAYLOADS: tuple[type[Payload], ...] = (
    RoundPayload,
    PlayerPayload,
    AlarmPayload,
    AlarmAckPayload,
    DevicePayload,
    StatusPayload,
    CheckpointPayload,
    ProtectionPayload,
)
DEFAULT_OUTPUT = Path("docs/schemas")
DESCRIPTIONS = {
    RoundPayload.SCHEMA: "one round as the table closed it: settled (on round), or dead, "
    "misdealt or voided with its reasons (on dead). QoS 1.",
    PlayerPayload.SCHEMA: "a player's own setting entered after the dealer's: the foul test and "
    "the Pai Gow wager. QoS 1.",
    AlarmPayload.SCHEMA: "something a supervisor must see: deck integrity, a device fault, a "
    "garbled frame, a deal that timed out. QoS 1.",
    AlarmAckPayload.SCHEMA: "a latched (critical) alarm acknowledged by a named person, with the "
    "channel and identity the acknowledgement came from. QoS 1.",
    DevicePayload.SCHEMA: "a device came online or went offline. QoS 1, retained.",
    ProtectionPayload.SCHEMA: "game protection: a statistical test of the shuffler, the RNG box or "
    "the dice passed its threshold (docs/protection.md); the same alarm is on alarm "
    "(game_protection), latched until acknowledged. QoS 1.",
    CheckpointPayload.SCHEMA: "the journal's hash chain at a row, signed with the checkpoint key: "
    "keep every one; 'paigow-table audit verify --checkpoints' checks a journal against them. "
    "QoS 1.",
    StatusPayload.SCHEMA: "the table controller's state: online, or offline (its last will, or a "
    "clean stop), its devices, software version and config digest. QoS 1, retained; published "
    "first on every connect.",
}
_TOPICS = {
    RoundPayload.SCHEMA: "round | dead",
    PlayerPayload.SCHEMA: "player",
    AlarmPayload.SCHEMA: "alarm",
    AlarmAckPayload.SCHEMA: "alarm_ack",
    CheckpointPayload.SCHEMA: "checkpoint",
    ProtectionPayload.SCHEMA: "protection",
    DevicePayload.SCHEMA: "device/<name>",
    StatusPayload.SCHEMA: "status",
}
_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def message_model(payload: type[Payload]) -> type[BaseModel]:
    """The envelope around ``payload`` as a model (controller.messages.envelope builds it)."""
    name = payload.__name__.removesuffix("Payload") + "Message"
    fields: dict[str, Any] = {
        "schema_": (
            Literal[payload.SCHEMA],
            Field(alias="schema", description="the payload's schema name"),
        ),
        "version": (Literal[payload.VERSION], Field(description="the schema's version")),
        "msg_id": (str, Field(description="unique; the same on every resend: deduplicate by it")),
        "table_id": (str, Field(description="the table that sent it")),
        "seq": (
            int,
            Field(
                ge=0,
                description="the table's message sequence number, consecutive over round, dead, "
                "alarm, player and device messages; status repeats the last one",
            ),
        ),
        "time": (datetime, Field(description="UTC time the message was journaled")),
        "replayed": (
            bool,
            Field(description="true when sent again or late (it was pending at a reconnect)"),
        ),
        "payload": (payload, ...),
        "sig": (
            Signature,
            Field(
                description="the table's Ed25519 signature of every other field (docs/mqtt.md "
                '"The signed feed"; controller/feed_signature.py verifies it)'
            ),
        ),
    }
    model: type[BaseModel] = create_model(
        name,
        __config__=ConfigDict(extra="forbid", populate_by_name=True),
        __doc__=f"{payload.SCHEMA} v{payload.VERSION} on <prefix>{_TOPICS[payload.SCHEMA]}: "
        + DESCRIPTIONS[payload.SCHEMA],
        **fields,
    )
    return model


def command_models() -> list[type[BaseModel]]:
    """The command models of the ``Command`` union, in its order."""
    members = get_args(get_args(Command)[0])
    return [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]


def _document(schema: dict[str, Any], schema_id: str) -> dict[str, Any]:
    return {"$schema": _DIALECT, "$id": schema_id, **schema}


def generate() -> dict[str, str]:
    """File name → JSON text of every schema, deterministic."""
    from controller.mqtt.wire import ReplyPayload

    documents: dict[str, dict[str, Any]] = {}
    for payload in PAYLOADS:
        file = f"{payload.SCHEMA}.v{payload.VERSION}.json"
        schema = message_model(payload).model_json_schema(mode="serialization")
        documents[file] = _document(schema, file)
    for command in command_models():
        kind = command.model_fields["kind"].default
        file = f"command.{kind}.json"
        body = command.model_json_schema(mode="validation")
        body["description"] = (
            f'The body of a message on <prefix>cmd/{kind} ("kind" may be left out). '
            + (command.__doc__ or "").strip()
        ).strip()
        documents[file] = _document(body, file)
    documents["reply.json"] = _document(
        ReplyPayload.model_json_schema(mode="serialization"), "reply.json"
    )
    return {
        file: json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
        for file, doc in sorted(documents.items())
    }


def write(output: Path) -> list[Path]:
    """Write every schema into ``output`` and remove stale ones; returns the files written."""
    output.mkdir(parents=True, exist_ok=True)
    files = generate()
    for old in output.glob("*.json"):
        if old.name not in files:
            old.unlink()
    written = []
    for name, text in files.items():
        path = output / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale(output: Path) -> list[str]:
    """Names of the files in ``output`` that are missing, different or no longer generated."""
    files = generate()
    problems = [
        name
        for name, text in files.items()
        if not (output / name).exists() or (output / name).read_text(encoding="utf-8") != text
    ]
    problems += [p.name for p in output.glob("*.json") if p.name not in files]
    return sorted(problems)


def cmd_schemas(args: argparse.Namespace) -> int:
    output = Path(args.output)
    if args.check and not output.is_dir():  # 66, one line, as every command (docs/audit.md)
        print(f"paigow-table schemas: {output}: no such directory", file=sys.stderr)
        return 66
    if args.check:
        problems = stale(output)
        for name in problems:
            print(f"{output / name}: out of date (run: paigow-table schemas --output {output})")
        return 1 if problems else 0
    for path in write(output):
        print(path)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", default=str(DEFAULT_OUTPUT), help="directory (docs/schemas)")
    p.add_argument("--check", action="store_true", help="only check the files are up to date")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller.schemas", description="Write the MQTT feed's JSON Schemas."
    )
    add_arguments(parser)
    return cmd_schemas(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
