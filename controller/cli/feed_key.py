"""``paigow-table feed-key init|show``: the table's own key that signs every message it
publishes (docs/mqtt.md "The signed feed"). ``init`` makes it once (the package's postinst runs
it as the service user); ``show`` prints the public key and key id to register with the pit, as
an SSH host key's fingerprint is compared. The private key never leaves the file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from controller.exits import EXIT_DATAERR, CliError, Subcommands, file_refusal


def _key_path(args: argparse.Namespace) -> Path:
    """``--key-file``, else the config's (``[mqtt] feed_key_file`` or ``feed.key`` beside its
    journal), else the package's default beside ``/var/lib/paigow-table/journal.sqlite3``."""
    from controller.config.fields import DEFAULT_JOURNAL_PATH
    from controller.mqtt.feed_key import DEFAULT_NAME, feed_key_path

    if args.key_file:
        return Path(args.key_file)
    if args.config:
        from controller.config import parse_config

        config_file = Path(args.config)
        config = parse_config(
            config_file.read_text(encoding="utf-8"),
            file=str(config_file),
            base_dir=config_file.resolve().parent,
            check_files=False,
        )
        path = feed_key_path(config)
        if path is None:
            raise ValueError(f"{config_file}: the journal is in memory: no key file")
        return path
    return DEFAULT_JOURNAL_PATH.parent / DEFAULT_NAME


def cmd_feed_key(args: argparse.Namespace) -> int:
    from controller.config import ConfigError
    from controller.feed_signature import public_key_line
    from controller.mqtt.feed_key import create_feed_key, read_feed_key

    try:
        path = _key_path(args)
        if args.action == "init":
            signer, created = create_feed_key(path)
        else:
            signer, created = read_feed_key(path), False
    except OSError as exc:  # the key (or the config naming it) missing or unreadable
        raise file_refusal(exc, "file") from None
    except (ValueError, ConfigError) as exc:  # not a key, or not a config
        raise CliError(EXIT_DATAERR, str(exc).splitlines()[0]) from None
    if created:
        print(f"{path}: a new key, readable by this user only", file=sys.stderr, flush=True)
    print(f"key_id {signer.key_id}", flush=True)
    print(f"public_key {public_key_line(signer.public_key)}", flush=True)
    return 0


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "feed-key",
        help="the table's key that signs its feed: make it (init) or print its public key (show)",
        description="init: make the table's Ed25519 feed key if there is none (mode 0600, as "
        "the user running it: the service user), then print as show does. show: print the key "
        "id and the public key ('ed25519 <hex>') to register with the pit. The key file is "
        "--key-file, else the config's [mqtt] feed_key_file (or feed.key beside its journal), "
        "else /var/lib/paigow-table/feed.key (docs/mqtt.md).",
    )
    p.add_argument("action", choices=["init", "show"])
    p.add_argument("--config", help="the table's config file")
    p.add_argument("--key-file", help="the key file itself")
    p.set_defaults(func=cmd_feed_key)
