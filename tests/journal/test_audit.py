"""The journal's hash chain and `paigow-table audit verify|recall` (docs/audit.md): a journal the
demo wrote verifies; any edit of a result, an event, a deletion or a reordering is found and
named by its round; retention's gaps are not called deletions; recall prints the rounds."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controller.audit import verify_journal
from controller.journal import Journal
from controller.journal.audit import recall_rounds
from controller.journal.maintenance import archive_rounds
from tests.journal.conftest import cli, copy_journal


def test_a_journal_the_demo_wrote_verifies(demo_journal: Path) -> None:
    done = cli("audit", "verify", "--journal", str(demo_journal))
    assert done.returncode == 0, done.stderr
    report = verify_journal(demo_journal)
    with sqlite3.connect(demo_journal) as conn:
        closed = conn.execute("SELECT count(*) FROM rounds WHERE status != 'open'").fetchone()[0]
    assert report.ok and report.sealed == closed >= 7  # a fault may leave the last one open
    assert report.chained == report.events > 8 * 10


def _round_of(path: Path, seq: int) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("SELECT round_id FROM rounds WHERE seq = ?", (seq,)).fetchone()[0])


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            "UPDATE rounds SET result = replace(result, '\"pays\":', '\"pays\":5') WHERE seq = 3",
            "result differs",
        ),
        ("UPDATE rounds SET status = 'void', reason = 'x' WHERE seq = 3", "status, reason"),
        (
            "UPDATE events SET payload = replace(payload, '\"index\":', '\"index\":1') "
            "WHERE id = (SELECT min(id) FROM events WHERE kind = 'packet_dealt' AND "
            "round_id = (SELECT round_id FROM rounds WHERE seq = 3))",
            "does not match its content",
        ),
        (
            "DELETE FROM events WHERE id = (SELECT min(id) FROM events WHERE round_id = "
            "(SELECT round_id FROM rounds WHERE seq = 3))",
            "deleted",
        ),
        (
            "UPDATE events SET id = -id WHERE round_id = (SELECT round_id FROM rounds WHERE "
            "seq = 3) AND kind IN ('deal_started', 'position_assigned')",
            "",
        ),
    ],
)
def test_every_edit_is_found_and_names_its_round(
    demo_journal: Path, tmp_path: Path, edit: str, expected: str
) -> None:
    path = copy_journal(demo_journal, tmp_path)
    with sqlite3.connect(path) as conn:
        assert conn.execute(edit).rowcount >= 1
    done = cli("audit", "verify", "--journal", str(path))
    assert done.returncode == 1
    assert f"round #3 {_round_of(path, 3)}" in done.stderr, done.stderr
    assert expected in done.stderr


def test_retention_gaps_are_not_deletions(demo_journal: Path, tmp_path: Path) -> None:
    path = copy_journal(demo_journal, tmp_path)
    later = datetime.now(UTC) + timedelta(days=2)  # retention removes nothing younger than a day
    with Journal.open(path, "PG-DEMO", clock=lambda: later) as journal:
        report = archive_rounds(
            journal, before=datetime(2100, 1, 1, tzinfo=UTC), directory=tmp_path / "a", batch=3
        )
    assert report.rounds >= 7
    after = verify_journal(path)
    assert after.ok, [f.line() for f in after.findings]
    assert after.bridged >= 1 and after.anchors == 0  # each gap's next link checked too


def test_recall_prints_each_round_as_journaled(demo_journal: Path) -> None:
    done = cli("audit", "recall", "--journal", str(demo_journal), "--last", "10")
    assert done.returncode == 0
    rounds = recall_rounds(demo_journal, last=10)
    assert len(rounds) >= 8
    for r in rounds:
        assert f"Round #{r['round_seq']}  {r['round_id']}" in done.stdout
        if r["status"] == "settled":
            rule = r["result"]["dealer"]["setting"]
            if rule:
                assert f"House Way {rule['rule']}" in done.stdout
    as_json = cli("audit", "recall", "--journal", str(demo_journal), "--last", "2", "--json")
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["round_id"] for r in lines] == [r["round_id"] for r in rounds[-2:]]
    one = cli("audit", "recall", "--journal", str(demo_journal), "--round", rounds[0]["round_id"])
    assert one.stdout.startswith(f"Round #{rounds[0]['round_seq']}")


def test_an_edit_with_its_seal_and_chain_forged_too_is_caught_by_dealing_again(
    demo_journal: Path, tmp_path: Path
) -> None:
    """An attacker who edits a result and rewrites its seal and every link after it (there is no
    key in the file) is caught by the recompute: the round dealt again from its device events
    does not give what was recorded."""
    from controller.journal.store import chain_link, seal_of

    path = copy_journal(demo_journal, tmp_path)
    with sqlite3.connect(path) as conn:
        rid, status, reason, result = conn.execute(
            "SELECT round_id, status, reason, result FROM rounds WHERE status = 'settled' "
            "ORDER BY seq LIMIT 1"
        ).fetchone()
        data = json.loads(result)
        data["seats"][0]["chan_chu"]["pays"] += 500  # Chan Chu paying 500
        forged = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        conn.execute("UPDATE rounds SET result = ? WHERE round_id = ?", (forged, rid))
        conn.execute(
            "UPDATE events SET payload = ? WHERE round_id = ? AND kind = 'round_sealed'",
            (json.dumps(seal_of(rid, status, reason, forged), separators=(",", ":")), rid),
        )
        prev = ""
        rows = conn.execute("SELECT id, round_id, at, kind, payload FROM events ORDER BY id")
        for event_id, round_id, at, kind, payload in rows.fetchall():
            prev = chain_link(prev, event_id, round_id, at, kind, payload)
            conn.execute("UPDATE events SET chain = ? WHERE id = ?", (prev, event_id))
    report = verify_journal(path)
    assert [f.round_id for f in report.findings] == [rid]
    assert "dealt again from its device events" in report.findings[0].detail


def test_a_signed_export_verifies_itself_and_a_changed_line_is_caught(
    demo_journal: Path, tmp_path: Path
) -> None:
    key = tmp_path / "export.key"
    key.write_text("5a" * 32 + "\n")
    out = tmp_path / "range.jsonl.gz"
    done = cli(
        "audit", "export", "--journal", str(demo_journal), "--since", "2000-01-01",
        "--out", str(out), "--key-file", str(key),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "8 rounds" in done.stdout and "signed" in done.stdout
    ok = cli("journal", "verify-archive", str(out), "--key-file", str(key))
    assert ok.returncode == 0 and "signature ok" in ok.stdout, ok.stderr
    lines = gzip.decompress(out.read_bytes()).decode().splitlines(keepends=True)
    rounds = [json.loads(line) for line in lines[1:-1]]
    assert [r["round_id"] for r in rounds] == [
        r["round_id"] for r in recall_rounds(demo_journal, last=100)
    ]
    # A forger who changes a result and recomputes every digest still lacks the key.
    first = json.loads(lines[1])
    first["status"] = "void" if first["status"] != "void" else "settled"
    lines[1] = json.dumps(first, separators=(",", ":"), ensure_ascii=False) + "\n"
    trailer = json.loads(lines[-1])
    trailer["sha256"] = hashlib.sha256("".join(lines[:-1]).encode()).hexdigest()
    lines[-1] = json.dumps(trailer, separators=(",", ":")) + "\n"
    out.write_bytes(gzip.compress("".join(lines).encode(), mtime=0))
    (tmp_path / "range.jsonl.gz.sha256").write_text(
        f"{hashlib.sha256(out.read_bytes()).hexdigest()}  range.jsonl.gz\n"
    )
    unkeyed = cli("journal", "verify-archive", str(out))
    assert unkeyed.returncode == 0  # its digests agree: only the signature can tell
    forged = cli("journal", "verify-archive", str(out), "--key-file", str(key))
    assert forged.returncode == 1 and "not signed with this key" in forged.stderr
