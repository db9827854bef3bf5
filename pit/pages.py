"""What the pit page and the CLI read of the database (``pit.store``'s room for them): tiles,
a table's detail, game protection pooled, a round's recall, the export, counts."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from pit import devices
from pit.db import Database, Limits

#: A seq a status named but the pit lacks is usually on its way (the status goes out at once, the
#: message through the table's outbox): a tile counts it missing only after this many seconds.
#: A pit of a shared group (``[broker] share_group``) sees a seq the other pit holds in its batch
#: as a jump (issue 31): its tiles give such a gap the same grace (``Limits.jump_gap_grace``).
STATUS_GAP_GRACE = 10.0


class PageQueries:
    """The page's and the CLI's reads, on a connection of their own (the page's thread builds
    this, never an ingest store)."""

    def __init__(self, db: Database, limits: Limits | None = None) -> None:
        self.db = db
        self.limits = limits or Limits()

    def table_ids(self) -> list[str]:
        return [r[0] for r in self.db.all("SELECT table_id FROM tables ORDER BY table_id")]

    def tiles(
        self, table_ids: Sequence[str] | None = None, now: float | None = None
    ) -> list[dict[str, Any]]:
        """The pit page's tile of each table (all, or those named)."""
        now = time.time() if now is None else now
        where, params = "", list[Any]()
        if table_ids is not None:
            if not table_ids:
                return []
            where, params = self.db.among(" WHERE t.table_id", table_ids)
        rows = self.db.all(
            "SELECT t.table_id, t.topic_prefix, t.status, t.last_round, t.protection, "
            "t.first_seq, t.high_seq, t.chain_event_id, t.chain_made_at, t.last_heard, "
            "t.silent_since FROM tables t" + where + " ORDER BY t.table_id",
            params,
        )
        counts = self._tile_counts(now, table_ids)
        record: dict[str, list[dict[str, Any]]] = {}
        for rid, tid, kind, detail, raised in self._grouped(
            "SELECT id, table_id, kind, detail, raised_at FROM record_alarms "
            "WHERE acked_at IS NULL AND raised_at >= ?",
            0.0,
            table_ids,
        ):
            record.setdefault(tid, []).append(
                {"id": rid, "kind": kind, "detail": detail, "raised_at": raised}
            )
        return [_tile(row, counts, record) for row in rows]

    def _tile_counts(
        self, now: float, table_ids: Sequence[str] | None
    ) -> dict[str, dict[str, int]]:
        """The counts every tile shows, by table: rounds in the last hour, open gaps past
        their grace, rejects, messages waiting for a key."""
        hour_ago = datetime.fromtimestamp(now - 3600, UTC).isoformat()
        per_hour = dict(
            self._grouped(
                "SELECT table_id, count(*) FROM rounds WHERE closed_at >= ?", hour_ago, table_ids
            )
        )
        gaps = dict(
            self._grouped(
                "SELECT table_id, count(*) FROM missing WHERE filled_at IS NULL AND "
                "(by_status = 0 AND reported_at < ? OR reported_at < ?)",
                (
                    now - self.limits.jump_gap_grace if self.limits.jump_gap_grace else math.inf,
                    now - STATUS_GAP_GRACE,
                ),
                table_ids,
            )
        )
        rejected = dict(
            self._grouped(
                # Counted, not the rows: rejects are kept as samples (pit/record.py); a reason
                # seen within the hour counts with all of its rejects since its first.
                # CAST: PostgreSQL's sum of a BIGINT is a numeric (a Decimal, which no JSON
                # encoder takes); the tile's count is an integer on both databases.
                "SELECT table_id, CAST(sum(count) AS BIGINT) FROM reject_counts WHERE last_at >= ?",
                now - 3600,
                table_ids,
            )
        )
        awaiting = dict(
            self._grouped(
                "SELECT table_id, count(*) FROM awaiting_key WHERE received_at >= ?", 0.0, table_ids
            )
        )
        return {"per_hour": per_hour, "gaps": gaps, "rejected": rejected, "awaiting": awaiting}

    def _grouped(
        self, sql: str, arg: Any, table_ids: Sequence[str] | None, by: str = "table_id"
    ) -> list[tuple[Any, ...]]:
        params: list[Any] = list(arg) if isinstance(arg, tuple) else [arg]
        if table_ids is not None:
            among, ids = self.db.among(f" AND {by}", table_ids)
            sql += among
            params += ids
        if "count(*)" in sql or "sum(count)" in sql:  # one row a table
            sql += f" GROUP BY {by}"
        return self.db.all(sql, params)

    def table_detail(self, table_id: str, rounds: int = 50) -> dict[str, Any] | None:
        tiles = self.tiles([table_id])
        if not tiles:
            return None
        tile = tiles[0]
        tile["rounds"] = [
            {
                "round_id": r[0], "round_seq": r[1], "status": r[2], "reasons": r[3],
                "dealer_id": r[4], "closed_at": r[5], "seats": r[6], "msg_seq": r[7],
            }
            for r in self.db.all(
                "SELECT round_id, round_seq, status, reasons, dealer_id, closed_at, seats, "
                "msg_seq FROM rounds WHERE table_id = ? ORDER BY round_seq DESC LIMIT ?",
                (table_id, rounds),
            )
        ]  # fmt: skip
        tile["gaps"] = [
            {"seq": r[0], "reported_at": r[1], "filled_at": r[2]}
            for r in self.db.all(
                "SELECT seq, reported_at, filled_at FROM missing WHERE table_id = ? "
                "ORDER BY seq DESC LIMIT 100",
                (table_id,),
            )
        ]
        tile["checkpoints"] = [
            {"event_id": r[0], "chain": r[1], "made_at": r[2], "signature": r[3]}
            for r in self.db.all(
                "SELECT event_id, chain, made_at, signature FROM checkpoints WHERE table_id = ? "
                "ORDER BY made_at DESC LIMIT 20",
                (table_id,),
            )
        ]
        tile["table_alarms"] = [
            {
                "alarm_id": r[0], "code": r[1], "severity": r[2], "detail": r[3],
                "raised_at": r[4], "ack_required": bool(r[5]), "acked_by": r[6], "acked_at": r[7],
            }
            for r in self.db.all(
                "SELECT alarm_id, code, severity, detail, raised_at, ack_required, acked_by, "
                "acked_at FROM alarms WHERE table_id = ? ORDER BY raised_at DESC LIMIT 50",
                (table_id,),
            )
        ]  # fmt: skip
        tile["device_history"] = devices.history(self.db, table_id)
        return tile

    def pooled_protection(self, shufflers: Mapping[str, str]) -> list[dict[str, Any]]:
        """Game protection across tables, pooled by shuffler and by model (``shufflers``: each
        table's 'MODEL SERIAL'): the tables, their rounds, the rounds voided or misdealt for a
        deck's reason, and the protection alarms each table raised, with the tests named."""
        deck_reasons = ("duplicate_card", "foreign_card", "second_joker", "bad_stub")
        per_table: dict[str, dict[str, Any]] = {}
        for tid, status, reasons, n in self.db.all(
            "SELECT table_id, status, reasons, count(*) FROM rounds GROUP BY table_id, status, "
            "reasons"
        ):
            row = per_table.setdefault(tid, {"rounds": 0, "deck_faults": 0, "alarms": 0,
                                              "tests": set()})  # fmt: skip
            row["rounds"] += n
            if status != "settled" and any(r in str(reasons) for r in deck_reasons):
                row["deck_faults"] += n
        for tid, n in self.db.all(
            "SELECT table_id, count(*) FROM alarms WHERE code = 'game_protection' GROUP BY table_id"
        ):
            per_table.setdefault(tid, {"rounds": 0, "deck_faults": 0, "alarms": 0,
                                       "tests": set()})["alarms"] += n  # fmt: skip
        for tid, protection in self.db.all(
            "SELECT table_id, protection FROM tables WHERE protection IS NOT NULL"
        ):
            test = json.loads(protection).get("test")
            per_table.setdefault(tid, {"rounds": 0, "deck_faults": 0, "alarms": 0,
                                       "tests": set()})["tests"].add(test)  # fmt: skip
        pools: dict[tuple[str, str], dict[str, Any]] = {}
        for table_id, shuffler in shufflers.items():
            model = shuffler.split()[0] if shuffler.split() else shuffler
            for kind, key in (("shuffler", shuffler), ("model", model)):
                pool = pools.setdefault(
                    (kind, key),
                    {"pool": kind, "id": key, "tables": [], "rounds": 0, "deck_faults": 0,
                     "protection_alarms": 0, "tests": set()},
                )  # fmt: skip
                found = per_table.get(table_id)
                pool["tables"].append(table_id)
                if found is not None:
                    pool["rounds"] += found["rounds"]
                    pool["deck_faults"] += found["deck_faults"]
                    pool["protection_alarms"] += found["alarms"]
                    pool["tests"] |= found["tests"]
        out = []
        for pool in sorted(pools.values(), key=lambda p: (p["pool"] != "shuffler", p["id"])):
            pool["tables"] = sorted(pool["tables"])
            pool["tests"] = sorted(t for t in pool["tests"] if t)
            pool["deck_fault_rate"] = (
                round(pool["deck_faults"] / pool["rounds"], 4) if pool["rounds"] else None
            )
            out.append(pool)
        return out

    def round_message(self, round_id: str) -> dict[str, Any] | None:
        """The round as the table last sent it (the recall)."""
        row = self.db.one(
            "SELECT m.body FROM messages m JOIN rounds r ON r.table_id = m.table_id "
            "AND r.msg_seq = m.seq WHERE r.round_id = ? AND m.sequenced = 1",
            (round_id,),
        )
        if row is None:
            return None
        data: dict[str, Any] = json.loads(row[0])
        return data

    def export_lines(self, table_id: str) -> Iterator[str]:
        """The table's copy of the feed, the envelopes one a line in seq order (what
        ``paigow-table audit verify --feed`` reads)."""
        cursor = self.db.x(
            "SELECT body FROM messages WHERE table_id = ? AND sequenced = 1 ORDER BY seq, "
            "received_at",
            (table_id,),
        )
        for (body,) in cursor:
            yield body

    def counts(self) -> dict[str, int]:
        def n(sql: str) -> int:
            row = self.db.one(sql)
            return int(row[0]) if row and row[0] is not None else 0

        return {
            "messages": n("SELECT count(*) FROM messages"),
            "sequenced": n("SELECT count(*) FROM messages WHERE sequenced = 1"),
            "rounds": n("SELECT count(*) FROM rounds"),
            "rejects": n("SELECT CAST(coalesce(sum(count), 0) AS BIGINT) FROM reject_counts"),
            "gaps_reported": n("SELECT count(*) FROM missing"),
            "gaps_open": n("SELECT count(*) FROM missing WHERE filled_at IS NULL"),
            "record_alarms": n("SELECT count(*) FROM record_alarms WHERE acked_at IS NULL"),
        }

    def seqs(self, table_id: str) -> list[int]:
        return [
            r[0]
            for r in self.db.all(
                "SELECT seq FROM messages WHERE table_id = ? AND sequenced = 1 ORDER BY seq",
                (table_id,),
            )
        ]


def _tile(
    row: tuple[Any, ...], counts: Mapping[str, Mapping[str, int]], record: Mapping[str, Any]
) -> dict[str, Any]:
    """One table's tile from its ``tables`` row and the counts read for all tiles."""
    tid, prefix, status, last_round, protection, first, high, ev, made, heard, silent = row
    st = orjson.loads(status) if status else None  # a tile a table: orjson, not json (issue 31)
    sp = (st or {}).get("payload") or {}
    return {
        "table_id": tid,
        "prefix": prefix,
        "state": "silent" if silent is not None else _state(sp),
        "last_heard": heard,
        "silent_since": silent,
        "rejected_last_hour": counts["rejected"].get(tid, 0),
        "table_open": bool(sp.get("table_open")),
        "round_in_progress": sp.get("round_id"),
        "dealer_id": sp.get("dealer_id"),
        "devices": sp.get("devices") or {},
        "fault": sp.get("fault"),
        "alarms": sp.get("alarms_unacknowledged") or [],
        "alarms_total": sp.get("alarms_unacknowledged_total") or 0,
        "last_round": orjson.loads(last_round) if last_round else None,
        "protection": orjson.loads(protection) if protection else None,
        "rounds_last_hour": counts["per_hour"].get(tid, 0),
        "first_seq": first,
        "high_seq": high,
        "open_gaps": counts["gaps"].get(tid, 0),
        "awaiting_key": counts["awaiting"].get(tid, 0),
        "record_alarms": record.get(tid, []),
        "chain": {"event_id": ev, "made_at": made},
        "status_time": (st or {}).get("time"),
    }


def _state(status: Mapping[str, Any]) -> str:
    """online, fault, closed (online but the table is closed), offline, or unknown."""
    state = status.get("state")
    if state is None:
        return "unknown"
    if state == "online" and not status.get("table_open"):
        return "closed"
    return str(state)


def floor_figures(db: Database, now: float | None = None) -> dict[str, Any]:
    """What the metrics read at a scrape (``pit.metrics``): the tables by the state their tile
    shows, the gaps still open and the oldest's age, the messages waiting for a key, and the
    record alarms not acknowledged by kind. A handful of aggregate queries, none per table."""
    now = time.time() if now is None else now
    states: dict[str, int] = {}
    for status, silent in db.all("SELECT status, silent_since FROM tables"):
        sp = ((orjson.loads(status) if status else None) or {}).get("payload") or {}
        state = "silent" if silent is not None else _state(sp)
        states[state] = states.get(state, 0) + 1
    gaps = db.one("SELECT count(*), min(reported_at) FROM missing WHERE filled_at IS NULL")
    open_gaps, oldest = (int(gaps[0] or 0), gaps[1]) if gaps else (0, None)
    awaiting = db.one("SELECT count(*) FROM awaiting_key")
    alarms = db.all("SELECT kind, count(*) FROM record_alarms WHERE acked_at IS NULL GROUP BY kind")
    return {
        "states": states,
        "gaps_open": open_gaps,
        "oldest_gap_s": max(now - float(oldest), 0.0) if oldest is not None else 0.0,
        "awaiting": int(awaiting[0]) if awaiting else 0,
        "alarms_by_kind": {str(kind): int(n) for kind, n in alarms},
    }
