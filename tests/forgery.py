"""What an attacker with a journal file and our source code can do to it, for the tests that
show the attack is caught (the checkpoints, the pit's live chain check)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from controller.journal.store import chain_link


def rewrite_row(journal: Path, row: int) -> None:
    """Event ``row``'s payload changed (a ``"forged": true`` member) and every link after it
    recomputed, so the hash chain is whole again: only an anchor kept elsewhere (a signed
    checkpoint) can tell."""
    with sqlite3.connect(journal) as conn:
        (payload,) = conn.execute("SELECT payload FROM events WHERE id = ?", (row,)).fetchone()
        forged = json.dumps({**json.loads(payload), "forged": True}, separators=(",", ":"))
        conn.execute("UPDATE events SET payload = ? WHERE id = ?", (forged, row))
        (previous,) = conn.execute(
            "SELECT coalesce((SELECT chain FROM events WHERE id < ? ORDER BY id DESC LIMIT 1), '')",
            (row,),
        ).fetchone()
        rows = conn.execute(
            "SELECT id, round_id, at, kind, payload FROM events WHERE id >= ? ORDER BY id", (row,)
        ).fetchall()
        for event_id, round_id, at, kind, text in rows:
            previous = chain_link(previous, event_id, round_id, at, kind, text)
            conn.execute("UPDATE events SET chain = ? WHERE id = ?", (previous, event_id))


def cut_last_round(journal: Path) -> None:
    """The journal's last sealed round cut off its tail (its events, its round row and the
    outbox), leaving a shorter chain that is whole: the row counter goes on after it."""
    with sqlite3.connect(journal) as conn:
        (last_round,) = conn.execute(
            "SELECT round_id FROM events WHERE kind = 'round_sealed' ORDER BY id DESC LIMIT 1"
        ).fetchone()
        (cut,) = conn.execute(
            "SELECT min(id) FROM events WHERE round_id = ?", (last_round,)
        ).fetchone()
        conn.execute("DELETE FROM events WHERE id >= ?", (cut,))
        conn.execute("DELETE FROM outbox")
        conn.execute("DELETE FROM rounds WHERE round_id = ?", (last_round,))
