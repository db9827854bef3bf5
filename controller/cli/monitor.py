"""``paigow-table monitor`` and ``schemas``: the MQTT feed for a person, and its JSON Schemas."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from controller.exits import EXIT_DATAERR, EXIT_UNAVAILABLE, CliError, Subcommands, file_refusal

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def cmd_monitor(args: argparse.Namespace) -> int:
    import asyncio

    from controller.mqtt.feed import BrokerDown, monitor

    try:
        return asyncio.run(monitor(args))
    except BrokerDown as exc:  # once it was subscribed, it retries a lost broker instead
        raise CliError(EXIT_UNAVAILABLE, str(exc)) from None


def cmd_schemas(args: argparse.Namespace) -> int:
    from controller import schemas

    return schemas.cmd_schemas(args)


def cmd_sign_command(args: argparse.Namespace) -> int:
    import json
    import sys
    import uuid

    from controller.clock import utc_now
    from controller.config import ConfigError
    from controller.mqtt.signing import read_keys, sign

    key: bytes | Ed25519PrivateKey
    try:
        body = json.loads(args.body)
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        _check_command(args.kind, body)
        table_id = args.table_id or _config_table_id(args.config)
        if args.private_key:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
            from cryptography.hazmat.primitives.serialization import load_pem_private_key

            loaded = load_pem_private_key(Path(args.private_key).read_bytes(), password=None)
            if not isinstance(loaded, Ed25519PrivateKey):
                raise ValueError(f"{args.private_key} is not an Ed25519 private key")
            key = loaded
        elif args.keys_file:
            try:
                keys = read_keys(args.keys_file)
            except ValueError as exc:  # not a keys file: 65, as every command says it
                raise CliError(EXIT_DATAERR, str(exc).splitlines()[0]) from None
            shared = keys.get(args.key_id)
            if not isinstance(shared, bytes):
                raise ValueError(f"no hmac-sha256 key {args.key_id!r} in {args.keys_file}")
            key = shared
        else:
            raise ValueError("give --keys-file (HMAC) or --private-key (Ed25519 PEM)")
        body.setdefault("request_id", args.request_id or uuid.uuid4().hex)
        signed = sign(key, args.key_id, args.kind, body, utc_now(), table_id=table_id)
    except OSError as exc:  # a keys file, a private key or a config missing or unreadable
        raise file_refusal(exc, "file") from None
    except (ConfigError, ValueError) as exc:
        print(f"sign-command: {str(exc).splitlines()[0]}", file=sys.stderr, flush=True)
        return 2
    print(json.dumps(signed, ensure_ascii=False, separators=(",", ":")), flush=True)
    return 0


def _check_command(kind: str, body: dict[str, object]) -> None:
    """ValueError (exit 2) for a kind the table does not know or a body its schema refuses:
    nothing is signed that the table would refuse to read (docs/mqtt.md)."""
    from pydantic import ValidationError

    from controller.messages import COMMAND_KINDS, parse_command
    from controller.mqtt.signing import TABLE_FIELD

    if kind not in COMMAND_KINDS:
        raise ValueError(f"unknown command kind {kind!r} (one of {', '.join(COMMAND_KINDS)})")
    fields = {k: v for k, v in body.items() if k != TABLE_FIELD}
    try:
        parse_command({**fields, "kind": kind})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "body"
        raise ValueError(f"the body is not a {kind} command: {where}: {first['msg']}") from None


def _config_table_id(path: str) -> str:
    """The ``[table] id`` of a table's config, validated as the table reads it (the files it
    names are not opened: the signer's machine need not have them)."""
    from controller.config import parse_config

    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: expected UTF-8 text: byte {exc.start} is not UTF-8") from None
    return parse_config(text, file=path, check_files=False).table.id


def register(sub: Subcommands) -> None:
    """Add ``monitor`` and ``schemas`` to the ``paigow-table`` command line (the schemas module,
    which builds every message model, is imported only when ``schemas`` runs)."""
    p = sub.add_parser(
        "monitor",
        help="print a table's MQTT feed as it arrives",
        description="Subscribe to <prefix># and print one line per message (topic, seq, "
        "schema, summary).",
    )
    p.add_argument("--broker", default="127.0.0.1:1883", metavar="HOST:PORT")
    p.add_argument(
        "--prefix",
        default="casino/+/paigow/+/",
        help="topic prefix, e.g. casino/demo/paigow/PG-DEMO/ (wildcards allowed)",
    )
    p.add_argument("--protocol", choices=["3.1.1", "5"], default="3.1.1")
    p.add_argument("--share", metavar="GROUP", help="subscribe as $share/GROUP/… (scale out)")
    p.add_argument("--username")
    p.add_argument("--password-file", help="file holding the password (never on the command line)")
    p.add_argument("--ca-file", help="CA of the broker's certificate (enables TLS)")
    p.add_argument("--cert-file", help="client certificate (TLS)")
    p.add_argument("--key-file", help="client key (TLS)")
    p.add_argument("--json", action="store_true", help="print each message as a JSON line")
    p.add_argument("--count", type=int, default=0, help="exit after N messages")
    p.set_defaults(func=cmd_monitor)
    p = sub.add_parser(
        "schemas",
        help="write the MQTT feed's JSON Schemas",
        description="Write the JSON Schemas of every message and command (docs/schemas).",
    )
    p.add_argument("--output", default="docs/schemas", help="directory (docs/schemas)")
    p.add_argument("--check", action="store_true", help="only check the files are up to date")
    p.set_defaults(func=cmd_schemas)
    p = sub.add_parser(
        "sign-command",
        help="sign a command for <prefix>cmd/KIND (HMAC-SHA256, docs/mqtt.md)",
        description="Print the signed JSON body of a command for one table: its fields, "
        "table_id, key_id, issued_at (now), a request_id and the signature. Publish it to that "
        "table's <prefix>cmd/KIND. void_round, player_setting and enter_dice act on a round: "
        "the body names it (round_id).",
    )
    p.add_argument("kind", help="the command, e.g. void_round")
    p.add_argument(
        "body",
        nargs="?",
        default="{}",
        help='its fields as JSON, e.g. \'{"reason": "…", "round_id": "PG-07-01K…"}\'',
    )
    table = p.add_mutually_exclusive_group(required=True)
    table.add_argument("--table-id", help="the table the command is for, e.g. PG-07")
    table.add_argument("--config", help="the table's config file: the command is for its table")
    p.add_argument(
        "--keys-file",
        help="a keys file like the table's ('KEY_ID hmac-sha256 SECRET_HEX' lines, docs/mqtt.md)",
    )
    p.add_argument("--private-key", help="an Ed25519 private key (PEM, e.g. from openssl genpkey)")
    p.add_argument("--key-id", required=True)
    p.add_argument("--request-id", help="default: a random one")
    p.set_defaults(func=cmd_sign_command)
