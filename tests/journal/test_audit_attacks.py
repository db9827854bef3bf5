"""`audit verify` attacked the way the outside audit did (issue 21), on copies of a journal the
demo wrote: erased links, a round deleted behind an unchained `archived` record, a round
rewritten with its seal and links recomputed, a cut tail, an edited `meta`. Each is found, by
the journal alone or with the casino's copy of the feed (rounds as sent, checkpoints)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from controller.audit import verify_journal
from controller.journal import Journal
from controller.journal.audit import read_feed, verify_feed
from controller.journal.maintenance import archive_rounds
from controller.journal.store import chain_link, seal_of
from tests.harness import running_table
from tests.journal.conftest import cli, copy_journal


def casino_feed(path: Path) -> list[str]:
    """The casino's copy: every closed round as the table sent it (`monitor --json` lines)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT seq, result FROM rounds WHERE result IS NOT NULL ORDER BY seq"
        ).fetchall()
    return [
        json.dumps(
            {
                "topic": "paigow/demo/PG-DEMO/round",
                "retain": False,
                "payload": {"schema": "paigow.round", "seq": seq, "payload": json.loads(result)},
            }
        )
        for seq, result in rows
    ]


def relink(conn: sqlite3.Connection) -> None:
    """What an attacker with the file and the source does: every link recomputed."""
    prev = ""
    rows = conn.execute("SELECT id, round_id, at, kind, payload FROM events ORDER BY id")
    for event_id, round_id, at, kind, payload in rows.fetchall():
        prev = chain_link(prev, event_id, round_id, at, kind, payload)
        conn.execute("UPDATE events SET chain = ? WHERE id = ?", (prev, event_id))


def _settled(conn: sqlite3.Connection, offset: int = 0) -> tuple[str, int, str]:
    row = conn.execute(
        "SELECT round_id, seq, result FROM rounds WHERE status = 'settled' ORDER BY seq "
        "LIMIT 1 OFFSET ?",
        (offset,),
    ).fetchone()
    return str(row[0]), int(row[1]), str(row[2])


def _details(findings: Iterator[Any] | list[Any]) -> str:
    return "\n".join(f.line() for f in findings)


def test_the_untouched_journal_and_its_feed_verify(demo_journal: Path, tmp_path: Path) -> None:
    report = verify_journal(demo_journal)
    assert report.ok, _details(report.findings)
    feed = verify_feed(demo_journal, read_feed(casino_feed(demo_journal)))
    assert feed.rounds >= 7 and not feed.findings, _details(feed.findings)
    lines = tmp_path / "feed.jsonl"
    lines.write_text("\n".join(casino_feed(demo_journal)) + "\n")
    done = cli("audit", "verify", "--journal", str(demo_journal), "--feed", str(lines))
    assert done.returncode == 0, done.stderr


def test_erased_links_and_a_500_to_1_payout_are_found(demo_journal: Path, tmp_path: Path) -> None:
    path = copy_journal(demo_journal, tmp_path)
    with sqlite3.connect(path) as conn:
        rid, _seq, result = _settled(conn)
        data = json.loads(result)
        data["seats"][0]["chan_chu"]["pays"] = 500
        conn.execute("UPDATE rounds SET result = ? WHERE round_id = ?", (json.dumps(data), rid))
        conn.execute("UPDATE events SET chain = NULL")
    report = verify_journal(path)
    assert not report.ok and "the links were erased" in _details(report.findings)
    done = cli("audit", "verify", "--journal", str(path))
    assert done.returncode == 1 and "links were erased" in done.stderr


def test_links_erased_after_the_chain_began_are_found(demo_journal: Path, tmp_path: Path) -> None:
    path = copy_journal(demo_journal, tmp_path)
    with sqlite3.connect(path) as conn:
        (last,) = conn.execute("SELECT max(id) FROM events").fetchone()
        conn.execute("UPDATE events SET chain = NULL WHERE id > ?", (last // 2,))
    report = verify_journal(path)
    assert "its link is missing after the chain began" in _details(report.findings)


def test_a_round_deleted_behind_an_unchained_archived_record_is_found(
    demo_journal: Path, tmp_path: Path
) -> None:
    path = copy_journal(demo_journal, tmp_path)
    with sqlite3.connect(path) as conn:
        rid, seq, _ = _settled(conn, 1)
        ids = [i for (i,) in conn.execute("SELECT id FROM events WHERE round_id = ?", (rid,))]
        conn.execute("DELETE FROM events WHERE round_id = ?", (rid,))
        conn.execute("DELETE FROM rounds WHERE round_id = ?", (rid,))
        conn.execute(
            "INSERT INTO events (round_id, at, kind, payload) VALUES (NULL, ?, 'archived', ?)",
            (
                "2026-01-01T00:00:00Z",
                json.dumps({"rounds": 1, "event_ids": [[min(ids), max(ids)]],
                            "round_seqs": [[seq, seq]], "links": {}}),
            ),
        )  # fmt: skip
    found = _details(verify_journal(path).findings)
    assert f"rows {min(ids)}–{max(ids)} were deleted" in found
    assert "its link is missing after the chain began" in found  # the inserted record itself
    assert f"rounds #{seq}–#{seq} are missing" in found


def test_a_round_rewritten_as_dead_with_its_chain_recomputed_is_found_by_the_feed(
    demo_journal: Path, tmp_path: Path
) -> None:
    """The attacker rewrites a settled round as dead (deal_timeout: the audit cannot deal such a
    round again), forges its seal, deletes a later row behind a chained `archived` record and
    recomputes every link. The journal alone cannot tell; the casino's copy can."""
    feed = casino_feed(demo_journal)
    path = copy_journal(demo_journal, tmp_path)
    with sqlite3.connect(path) as conn:
        rid, seq, result = _settled(conn)
        data = json.loads(result)
        data.update(status="dead", reasons=[{"code": "deal_timeout", "detail": "forged"}])
        forged = json.dumps(data, separators=(",", ":"))
        conn.execute(
            "UPDATE rounds SET status = 'dead', reason = 'deal_timeout', result = ? "
            "WHERE round_id = ?",
            (forged, rid),
        )
        conn.execute(
            "UPDATE events SET payload = ? WHERE round_id = ? AND kind = 'round_sealed'",
            (json.dumps(seal_of(rid, "dead", "deal_timeout", forged), separators=(",", ":")), rid),
        )
        relink(conn)
    report = verify_journal(path)
    assert all(f.round_id != rid or "dealt again" not in f.detail for f in report.findings)
    checked = verify_feed(path, read_feed(feed))
    assert [f.round_id for f in checked.findings] == [rid]
    assert "holds it as dead, not as the table sent it (settled)" in checked.findings[0].detail
    lines = tmp_path / "feed.jsonl"
    lines.write_text("\n".join(feed) + "\n")
    done = cli("audit", "verify", "--journal", str(path), "--feed", str(lines))
    assert done.returncode == 1 and rid in done.stderr and f"round #{seq}" in done.stderr


def test_a_cut_tail_is_found_by_the_feed_and_the_checkpoints(
    demo_journal: Path, tmp_path: Path
) -> None:
    with sqlite3.connect(demo_journal) as conn:
        head_id, head = conn.execute(
            "SELECT id, chain FROM events ORDER BY id DESC LIMIT 1"
        ).fetchone()
    checkpoint = json.dumps(
        {"schema": "paigow.checkpoint", "seq": 999, "payload": {
            "table_id": "PG-DEMO", "event_id": head_id, "chain": head,
            "made_at": "2026-01-01T00:00:00Z", "key_id": "", "hmac": ""}}
    )  # fmt: skip
    feed = [*casino_feed(demo_journal), checkpoint]
    path = copy_journal(demo_journal, tmp_path)
    with sqlite3.connect(path) as conn:
        (last_seq,) = conn.execute("SELECT max(seq) FROM rounds").fetchone()
        (first_cut,) = conn.execute(
            "SELECT min(e.id) FROM events e JOIN rounds r USING (round_id) WHERE r.seq >= ?",
            (last_seq - 1,),
        ).fetchone()
        conn.execute("DELETE FROM events WHERE id >= ?", (first_cut,))
        conn.execute("DELETE FROM rounds WHERE seq >= ?", (last_seq - 1,))
    assert verify_journal(path).ok  # a prefix of a chain is a chain: the journal alone is fooled
    checked = verify_feed(path, read_feed(feed))
    found = _details(checked.findings)
    assert "the journal does not hold it" in found and checked.unsigned == 1
    assert f"event row {head_id}" in found


def test_retention_names_its_archive_and_keeps_the_chain_checked(
    demo_journal: Path, tmp_path: Path
) -> None:
    feed = casino_feed(demo_journal)
    path = copy_journal(demo_journal, tmp_path)
    later = datetime.now(UTC) + timedelta(days=2)  # retention removes nothing younger than a day
    with Journal.open(path, "PG-DEMO", clock=lambda: later) as journal:
        report = archive_rounds(
            journal, before=datetime(2100, 1, 1, tzinfo=UTC), directory=tmp_path / "a", batch=4
        )
    assert report.rounds >= 7
    with sqlite3.connect(path) as conn:
        query = "SELECT payload FROM events WHERE kind = 'archived' AND chain IS NOT NULL"
        records = [json.loads(p) for (p,) in conn.execute(query)]

    for record in records:
        archive = tmp_path / "a" / record["archive"]
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == record["sha256"]
        assert record["round_seqs"] and record["links"]
    after = verify_journal(path)
    assert after.ok and after.bridged >= 1 and after.anchors == 0, _details(after.findings)
    # An archived round is checked against its archive; without the archive it is a finding.
    assert not verify_feed(path, read_feed(feed), archives=[tmp_path / "a"]).findings
    unchecked = verify_feed(path, read_feed(feed))
    assert unchecked.archived >= 7 and len(unchecked.findings) == unchecked.archived


async def test_an_edited_meta_is_found_and_the_table_goes_by_the_chain(tmp_path: Path) -> None:
    """One `UPDATE meta` cleared every unacknowledged critical alarm at the next start."""
    journal_path = tmp_path / "journal.sqlite3"
    alarm = {
        "code": "deck_integrity",
        "severity": "critical",
        "detail": "a foreign card",
        "alarm_id": "alarm-1",
        "raised_at": "2026-11-25T10:00:00Z",
        "ack_required": True,
    }
    with Journal.open(journal_path, "PG-T1") as journal, journal.transaction() as tx:
        tx.remember("latched_alarms", [alarm])
    assert verify_journal(journal_path).ok
    with sqlite3.connect(journal_path) as conn:
        conn.execute("UPDATE meta SET value = '[]' WHERE key = 'latched_alarms/PG-T1'")
    found = _details(verify_journal(journal_path).findings)
    assert "kept state 'latched_alarms' differs from what was last recorded" in found
    async with running_table(tmp_path / "run", journal_path=journal_path) as t:
        codes = sorted(a.code for a in t.daemon.table.latched.values())
        assert codes == ["deck_integrity", "kept_state_edited"]


def test_a_malformed_line_in_the_feed_is_a_finding_and_the_rest_is_checked(
    demo_journal: Path, tmp_path: Path
) -> None:
    feed = casino_feed(demo_journal)
    bad = [
        "not json",
        '{"payload":{"schema":"paigow.round","seq":"x","payload":{"round_id":"r"}}}',
        '{"schema":"paigow.checkpoint","payload":{"event_id":"zz"}}',
        "[1, 2]",
    ]
    lines = tmp_path / "feed.jsonl"
    lines.write_text("\n".join([*bad, *feed]) + "\n")
    done = cli("audit", "verify", "--journal", str(demo_journal), "--feed", str(lines))
    assert done.returncode == 1, done.stderr
    assert "line 2 of the feed is not a message" in done.stderr
    assert "a checkpoint in the feed cannot be read" in done.stderr
    assert f"{len(feed)} rounds" in done.stdout  # every good line still checked
