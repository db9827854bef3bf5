"""Signed checkpoints of the journal's hash chain (docs/audit.md "Checkpoints"): now and then
the table publishes the id and hash of its newest chained event, with an HMAC-SHA256 under a
key from a credential. The casino system keeps them: a journal rewritten afterwards, even with
its whole chain recomputed, no longer has those hashes at those rows, and the table cannot
forge a new checkpoint for the rewrite without the key leaving a trace in the casino's records.

Each checkpoint names the one before it (``prev_event_id``) and the hash the journal holds at
that row when the new one is made (``prev_chain``): the checkpoints are a chain of their own, so
a receiver holding only the last one sees a rewritten or cut history at the next
(controller/feed_checkpoint.py ``checkpoint_link``), live, not only when the journal is audited.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from controller.feed_checkpoint import CHECKPOINT_FIELDS, checkpoint_hmac_bytes, checkpoint_link
from controller.journal.store import open_read_only

SIGNED_FIELDS = CHECKPOINT_FIELDS


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
    """What the HMAC covers (controller/feed_checkpoint.py ``checkpoint_hmac_bytes``): the
    signed fields, and the link to the previous checkpoint when there is one, as compact JSON
    with sorted keys."""
    return checkpoint_hmac_bytes(body)


def sign_checkpoint(key: bytes, body: Mapping[str, Any]) -> str:
    return hmac.new(key, canonical(body), hashlib.sha256).hexdigest()


class ChainReader:
    """What a new checkpoint names of the one before it, read from the journal as it stands
    (a read-only connection beside the daemon's): the newest ``checkpoint`` event's row and the
    chain hash the journal holds at that row now."""

    def __init__(self, journal: str | os.PathLike[str]) -> None:
        self._conn = open_read_only(journal)

    def close(self) -> None:
        self._conn.close()

    def last_checkpoint(self) -> int | None:
        """The ``event_id`` the newest journaled checkpoint anchored, or None."""
        row = self._conn.execute(
            "SELECT payload FROM events WHERE kind = 'checkpoint' ORDER BY id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        try:
            event_id = json.loads(row[0]).get("event_id")
        except (ValueError, AttributeError):
            return None
        return event_id if isinstance(event_id, int) else None

    def chain_at(self, event_id: int) -> str | None:
        """The chain hash at row ``event_id`` now; None when the row is gone."""
        row = self._conn.execute("SELECT chain FROM events WHERE id = ?", (event_id,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])


def _check_one(
    conn: sqlite3.Connection, body: Mapping[str, Any], key: bytes
) -> tuple[int | None, str] | None:
    """One checkpoint's problem against ``key`` and the journal, or None: its HMAC, then the
    hash the journal holds at its row and at the row of the checkpoint it names before it."""
    row = int(body["event_id"])
    if not hmac.compare_digest(str(body.get("hmac", "")), sign_checkpoint(key, body)):
        return (row, "the checkpoint's HMAC is wrong: not made with this key")
    found = conn.execute("SELECT chain FROM events WHERE id = ?", (row,)).fetchone()
    if found is None:
        return (row, f"the checkpoint of {body['made_at']} names a row the journal lacks")
    if found[0] != body["chain"]:
        return (
            row,
            f"the journal's hash differs from the checkpoint published at {body['made_at']}: "
            "the journal was rewritten after it",
        )
    return None


def _link_problem(last: Mapping[str, Any] | None, body: Mapping[str, Any]) -> str | None:
    """Whether ``body`` follows ``last`` (the checkpoint before it in the casino's copy), in
    the words of the audit; a checkpoint from before the links (no ``prev_event_id``) is not
    checked."""
    if "prev_event_id" not in body:
        return None
    problem = checkpoint_link(last, body)
    if problem is None:
        return None
    return (
        f"the checkpoint of {body['made_at']} does not follow the one before it "
        f"({problem.kind}): {problem.detail}"
    )


def verify_checkpoints(
    journal: str | os.PathLike[str], checkpoints: Iterable[Mapping[str, Any]], key: bytes
) -> tuple[int, list[tuple[int | None, str]]]:
    """Check each checkpoint (a ``paigow.checkpoint`` message, or its payload) against ``key``
    and the journal: its HMAC, then the hash the journal holds at its row; and, in the order
    of their rows, that each names the one before it (``prev_event_id``, ``prev_chain``:
    controller/feed_signature.py ``checkpoint_link``). Returns how many were checked and the
    problems as (row, what)."""
    problems: list[tuple[int | None, str]] = []
    bodies: list[Mapping[str, Any]] = []
    with contextlib.closing(open_read_only(journal)) as conn:
        for message in checkpoints:
            body = message.get("payload", message)
            try:
                problem = _check_one(conn, body, key)
            except KeyError as exc:
                problems.append((None, f"a checkpoint without {exc}: not a paigow.checkpoint"))
                continue
            bodies.append(body)
            if problem is not None:
                problems.append(problem)
    last: Mapping[str, Any] | None = None
    for body in sorted(bodies, key=lambda b: int(b["event_id"])):
        link = _link_problem(last, body)
        if link is not None:
            problems.append((int(body["event_id"]), link))
        last = body
    return len(bodies), problems


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
