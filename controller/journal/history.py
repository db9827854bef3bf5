"""Reading the journal's history: rounds by id or number, the last round, rounds per hour.

Long scans read in chunks and let the journal's lock go between them, so a supervisor's search
never stalls a deal.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from controller.journal.store import RoundRecord
from controller.journal.views import History
from controller.messages import PlayerPayload, RoundPayload

CHUNK = 200  # rounds read from the journal per lock hold, so a long query never stalls a deal
MAX_SCAN = 10_000


def scan(journal: History, limit: int = MAX_SCAN) -> Iterator[RoundRecord]:
    """This table's rounds, newest first, read in chunks (the journal lock is let go between)."""
    offset = 0
    while offset < limit:
        chunk = journal.recent_rounds(min(CHUNK, limit - offset), offset)
        yield from chunk
        if len(chunk) < CHUNK:
            return
        offset += len(chunk)


def search(journal: History, query: str, limit: int, offset: int) -> list[RoundRecord]:
    """Rounds by id (exact, then any part, case-insensitive) or by number (``123``, ``#123``)."""
    query = query.strip()
    if not query:
        return journal.recent_rounds(limit, offset)
    exact = journal.get_round(query)
    if exact is not None and exact.table_id == journal.table_id:
        return [exact]
    number = query.removeprefix("#")
    wanted = query.lower()
    found: list[RoundRecord] = []
    for record in scan(journal):
        if (number.isdigit() and record.seq == int(number)) or wanted in record.round_id.lower():
            found.append(record)
            if len(found) >= offset + limit:
                break
    return found[offset:]


def results_oldest_first(journal: History, rounds: int) -> list[dict[str, Any] | None]:
    return [r.result for r in scan(journal, rounds)][::-1]


def rounds_per_hour(journal: History, hours: int, now: datetime) -> list[dict[str, Any]]:
    start = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(
        hours=hours - 1
    )
    counts = {c.hour: c for c in journal.round_counts_by_hour(since=start)}
    out = []
    for i in range(hours):
        hour = (start + timedelta(hours=i)).strftime("%Y-%m-%dT%H:00Z")
        c = counts.get(hour)
        out.append(
            {"hour": hour, "total": c.total if c else 0, "by_status": c.by_status if c else {}}
        )
    return out


def last_round(journal: History) -> tuple[RoundPayload, list[PlayerPayload]] | None:
    """The journal's newest round if it is closed, with its players' settings (after a restart)."""
    recent = journal.recent_rounds(1)
    if not recent or recent[0].result is None:
        return None
    record = journal.get_round(recent[0].round_id)
    if record is None or record.result is None:
        return None
    try:
        payload = RoundPayload.model_validate(record.result)
        players = [
            PlayerPayload.model_validate(e.payload)
            for e in record.events
            if e.kind == "player_settled"
        ]
    except ValidationError:
        return None
    return payload, players
