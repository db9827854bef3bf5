"""The tables' public feed keys, as the pit registers them (docs/pit.md "Every message the
table's own signed words"), like an SSH ``known_hosts``: ``[record] feed_keys_file`` names a
file with one line per key::

    # table     the public key, as `paigow-table feed-key show` prints it
    PG-01       ed25519 3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29

A table may have several lines (a new key registered before the table switches to it); a table
with none is not registered: its messages are refused with a ``key_unregistered`` record alarm
naming the key id it signs with, so IT can check it (``paigow-table feed-key show`` on the
table) and add the line. The file is read again when its content changes (its SHA-256, checked
at every batch: an edit that keeps its size and mtime is seen too): registering a key needs no
restart, and a message refused only for a key not registered yet is judged again then
(``pit.awaiting``). A file that does not parse is refused at start (``PitConfigError``); later,
the keys read before stay in force and the error is logged.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from controller.feed_signature import keyring, public_key_line

log = logging.getLogger("pit.keys")

Keyring = Mapping[str, Ed25519PublicKey]


class KeysFileError(ValueError):
    """A keys file line that is not ``TABLE_ID ed25519 <64 hex digits>``."""


def parse_keys(text: str, file: str = "<feed keys>") -> dict[str, dict[str, Ed25519PublicKey]]:
    """Each table's keyring from the text of a keys file (module text)."""
    lines: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 3 or len(words[0]) > 64:
            raise KeysFileError(
                f"{file}:{number}: expected 'TABLE_ID ed25519 <64 hex digits>' "
                "(the public_key line of paigow-table feed-key show)"
            )
        lines.setdefault(words[0], []).append(" ".join(words[1:]))
    out: dict[str, dict[str, Ed25519PublicKey]] = {}
    for table_id, keys in lines.items():
        try:
            out[table_id] = keyring(keys)
        except ValueError as exc:
            raise KeysFileError(f"{file}: {table_id}: {exc}") from None
    return out


def keys_line(table_id: str, public_key: Ed25519PublicKey) -> str:
    """A keys file's line registering ``public_key`` for ``table_id``."""
    return f"{table_id} {public_key_line(public_key)}\n"


class FeedKeys:
    """Each table's registered keys (a keys file, or given); ``for_table`` is None for a table
    not registered."""

    def __init__(
        self,
        keys: Mapping[str, Keyring] | None = None,
        *,
        path: Path | None = None,
    ) -> None:
        self.path = path
        self._keys: dict[str, Keyring] = dict(keys or {})
        self._digest: bytes | None = None
        if path is not None:
            self._keys.update(self._read(path))

    def _read(self, path: Path) -> dict[str, dict[str, Ed25519PublicKey]]:
        data = path.read_bytes()
        keys = parse_keys(data.decode("utf-8"), str(path))
        self._digest = hashlib.sha256(data).digest()
        return keys

    def refresh(self) -> bool:
        """Read the keys file again if its content changed (True then); a file that no longer
        parses keeps the keys read before (logged). By content, not (mtime, size): an edit
        within the same second and of the same length is not missed."""
        if self.path is None:
            return False
        try:
            data = self.path.read_bytes()
            if hashlib.sha256(data).digest() == self._digest:
                return False
            self._keys = dict(self._read(self.path))
        except (OSError, ValueError) as exc:
            log.error("pit_feed_keys_unreadable: %s (the keys read before stay)", exc)
            return False
        log.info("pit_feed_keys_read tables=%d", len(self._keys))
        return True

    def for_table(self, table_id: str) -> Keyring | None:
        return self._keys.get(table_id)

    def tables(self) -> list[str]:
        return sorted(self._keys)
