"""The shift's numbers, per table and dealer (shift boundaries in ``[shift]``): rounds, seats
played, dead / misdeal / void counts and their reasons, players' Pai Gow results, side-wager
hold against the theoretical hold (docs/math.md house edges), rounds per hour; as rows, as CSV
and as a signed end-of-shift report (HMAC-SHA256 under ``[shift] report_key_file``).

Rounds per hour, the one definition the page uses everywhere (docs/pit.md): rounds closed in a
span ÷ the span's hours, a span never counted as less than one hour. A row's span is its
table's play in the shift (the first round opened to the last closed); a tile's, the last 60
minutes (so a tile's figure is the count of rounds closed in the last hour). A minute's play is
not extrapolated to an hour: ten rounds in the first minute are 10 an hour, not 600."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from pit.db import parse_time
from pit.pages import PageQueries

COLUMNS = [
    "shift", "table_id", "dealer_id", "rounds", "settled", "dead", "misdeal", "void", "reasons",
    "seats_played", "players_win", "players_push", "players_lose", "fouls", "side_wagered",
    "side_won_by_players", "hold", "theoretical_hold", "rounds_per_hour",
]  # fmt: skip


def shifts(store: PageQueries) -> list[str]:
    return [r[0] for r in store.db.all("SELECT DISTINCT shift FROM rounds ORDER BY shift DESC")]


def numbers(store: PageQueries, shift: str) -> list[dict[str, Any]]:
    """One row per table and dealer of ``shift`` (a dealer of none: ``-``)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    spans: dict[tuple[str, str], list[datetime]] = {}
    reasons: dict[tuple[str, str], Counter[str]] = {}
    for tid, dealer, status, why, seats, opened, closed, wagered, won, theo in store.db.all(
        "SELECT table_id, dealer_id, status, reasons, seats, opened_at, closed_at, side_wagered, "
        "side_won, side_theoretical FROM rounds WHERE shift = ?",
        (shift,),
    ):
        key = (tid, dealer or "-")
        row = rows.setdefault(
            key,
            {c: 0 for c in COLUMNS}
            | {"shift": shift, "table_id": tid, "dealer_id": key[1], "theoretical": 0.0},
        )
        row["rounds"] += 1
        row[status] = row.get(status, 0) + 1
        row["seats_played"] += seats if status == "settled" else 0
        row["side_wagered"] += wagered
        row["side_won_by_players"] += won
        row["theoretical"] += theo
        for code in filter(None, str(why).split(",")):
            reasons.setdefault(key, Counter())[code] += 1
        spans.setdefault(key, []).extend([parse_time(opened), parse_time(closed)])
    for tid, dealer, outcome, foul, n in store.db.all(
        "SELECT r.table_id, r.dealer_id, p.outcome, p.foul, count(*) FROM players p "
        "JOIN rounds r ON r.table_id = p.table_id AND r.round_id = p.round_id WHERE r.shift = ? "
        "GROUP BY r.table_id, r.dealer_id, p.outcome, p.foul",
        (shift,),
    ):
        key = (tid, dealer or "-")
        if key not in rows:
            continue
        if outcome in ("win", "push", "lose"):
            rows[key][f"players_{outcome}"] += n
        if foul:
            rows[key]["fouls"] += n
    out = []
    for key, row in sorted(rows.items()):
        times = spans[key]
        hours = max((max(times) - min(times)).total_seconds() / 3600, 1.0)
        row["rounds_per_hour"] = round(row["rounds"] / hours, 1)
        row["reasons"] = " ".join(f"{c}:{n}" for c, n in sorted(reasons.get(key, {}).items()))
        wagered = row["side_wagered"]
        row["hold"] = round(-row["side_won_by_players"] / wagered, 4) if wagered else None
        row["theoretical_hold"] = round(row.pop("theoretical") / wagered, 4) if wagered else None
        row.pop("theoretical", None)
        out.append(row)
    return out


def to_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in COLUMNS})
    return buffer.getvalue()


def report(store: PageQueries, shift: str, key: bytes, key_id: str, site: str) -> dict[str, Any]:
    """The signed end-of-shift report: the numbers, each table's chain head and copy (first and
    last seq, gaps still open), and an HMAC-SHA256 over the rest as compact sorted JSON."""
    tables = {}
    for tile in store.tiles():
        tables[tile["table_id"]] = {
            "first_seq": tile["first_seq"],
            "high_seq": tile["high_seq"],
            "open_gaps": tile["open_gaps"],
            "chain": tile["chain"],
            "record_alarms": [a["kind"] for a in tile["record_alarms"]],
        }
    body: dict[str, Any] = {
        "kind": "paigow.pit.shift_report",
        "version": 1,
        "site": site,
        "shift": shift,
        "made_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "numbers": numbers(store, shift),
        "tables": tables,
        "key_id": key_id,
    }
    body["hmac"] = sign_report(key, body)
    return body


def sign_report(key: bytes, body: dict[str, Any]) -> str:
    data = {k: v for k, v in body.items() if k != "hmac"}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a report read back with a lone surrogate is checked (and fails), not a crash
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def verify_report(key: bytes, body: Any) -> bool:
    """Whether ``body`` (a report read back, whatever its file held) is signed with ``key``:
    anything but a JSON object, or an ``hmac`` that is not the right one (also one with
    characters beyond ASCII), is False, never an exception."""
    if not isinstance(body, dict):
        return False
    claimed = str(body.get("hmac", "")).encode("utf-8", "backslashreplace")
    return hmac.compare_digest(claimed, sign_report(key, body).encode("ascii"))
