"""Signed checkpoints of the journal's hash chain (docs/audit.md "Checkpoints"): now and then
the table publishes the id and hash of its newest chained event, with an HMAC-SHA256 under a
key from a credential. The casino system keeps them: a journal rewritten afterwards, even with
its whole chain recomputed, no longer has those hashes at those rows, and the table cannot
forge a new checkpoint for the rewrite without the key leaving a trace in the casino's records.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from controller.journal.store import open_read_only

SIGNED_FIELDS = ("table_id", "event_id", "chain", "made_at")


def read_hex_key(path: str | Path) -> bytes:
    """An HMAC key file (checkpoints, signed exports): hex on the first line, at least 32
    bytes. ValueError says what is wrong."""
    text = Path(path).read_text(encoding="utf-8").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{path}: expected the key as hex digits") from None
    if len(key) < 32:
        raise ValueError(f"{path}: the key is shorter than 32 bytes")
    return key


def canonical(body: Mapping[str, Any]) -> bytes:
    """What the HMAC covers: the signed fields as compact JSON with sorted keys."""
    signed = {name: body[name] for name in SIGNED_FIELDS}
    return json.dumps(signed, sort_keys=True, separators=(",", ":")).encode("utf-8")


def sign_checkpoint(key: bytes, body: Mapping[str, Any]) -> str:
    return hmac.new(key, canonical(body), hashlib.sha256).hexdigest()


def verify_checkpoints(
    journal: str | os.PathLike[str], checkpoints: Iterable[Mapping[str, Any]], key: bytes
) -> tuple[int, list[tuple[int | None, str]]]:
    """Check each checkpoint (a ``paigow.checkpoint`` message, or its payload) against ``key``
    and the journal: its HMAC, then the hash the journal holds at its row. Returns how many
    were checked and the problems as (row, what)."""
    problems: list[tuple[int | None, str]] = []
    checked = 0
    with contextlib.closing(open_read_only(journal)) as conn:
        for message in checkpoints:
            body = message.get("payload", message)
            try:
                expected = sign_checkpoint(key, body)
            except KeyError as exc:
                problems.append((None, f"a checkpoint without {exc}: not a paigow.checkpoint"))
                continue
            checked += 1
            row = int(body["event_id"])
            if not hmac.compare_digest(str(body.get("hmac", "")), expected):
                problems.append((row, "the checkpoint's HMAC is wrong: not made with this key"))
                continue
            found = conn.execute("SELECT chain FROM events WHERE id = ?", (row,)).fetchone()
            if found is None:
                problems.append(
                    (row, f"the checkpoint of {body['made_at']} names a row the journal lacks")
                )
            elif found[0] != body["chain"]:
                problems.append(
                    (
                        row,
                        f"the journal's hash differs from the checkpoint published at "
                        f"{body['made_at']}: the journal was rewritten after it",
                    )
                )
    return checked, problems


def read_checkpoint_lines(path: str | Path) -> list[dict[str, Any]]:
    """Checkpoints as the casino system stored them: one JSON message a line."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise ValueError(f"{path}:{number}: not a JSON line") from None
    return out
