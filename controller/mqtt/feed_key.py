"""The table's own feed key (docs/mqtt.md "The signed feed"): an Ed25519 private key in a file
only the service user reads, made once (at install, by ``paigow-table feed-key init``), never
sent anywhere. Its public key and key id (``paigow-table feed-key show``) are registered with the
pit, as an SSH host key is.

Where it is: ``[mqtt] feed_key_file``, or, when that is not set, ``feed.key`` beside the
journal (``/var/lib/paigow-table/feed.key`` where the package puts it), made at the first start
if it is missing, so a development table or the demo signs too. A journal in memory (tests)
signs with a key that lives as long as the process.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from controller.config.readers import read_feed_key as read_feed_key
from controller.feed_signature import FeedSigner

if TYPE_CHECKING:
    from controller.config import Config

log = structlog.get_logger(__name__)

DEFAULT_NAME = "feed.key"


def create_feed_key(path: str | Path) -> tuple[FeedSigner, bool]:
    """The key at ``path``, made first if there is none (True then): written to a temporary
    file of mode 0600 in the same directory, synced, and linked into place, so no other user
    ever reads it, a crash leaves no half key, and a key already there is never replaced."""
    path = Path(path)
    if path.exists():
        return read_feed_key(path), False
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:  # made meanwhile by another process: that one is the key
            return read_feed_key(path), False
        _sync_directory(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return FeedSigner(key), True


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def feed_key_path(config: Config) -> Path | None:
    """Where the table's key is: ``[mqtt] feed_key_file``, else ``feed.key`` beside the
    journal; None for a journal in memory."""
    if config.mqtt.feed_key_file is not None:
        return Path(config.mqtt.feed_key_file)
    journal = str(config.journal.path)
    if journal == ":memory:":
        return None
    return Path(journal).parent / DEFAULT_NAME


def table_signer(config: Config) -> FeedSigner:
    """The table's signer: the configured key file (it must exist), else the default one, made
    if missing; OSError or ValueError when it cannot be read or made."""
    path = feed_key_path(config)
    if path is None:
        log.warning("feed_key_ephemeral", detail="journal in memory: a key for this process only")
        return FeedSigner(seed=os.urandom(32))
    if config.mqtt.feed_key_file is not None:
        return read_feed_key(path)
    signer, created = create_feed_key(path)
    if created:
        log.warning(
            "feed_key_created",
            path=str(path),
            key_id=signer.key_id,
            detail="register its public key with the pit: paigow-table feed-key show",
        )
    return signer
