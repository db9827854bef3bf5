"""Retention attacked (issue 32, N1′), on copies of a journal the demo wrote: the product's own
retention call asked to remove a settled round from the middle; a chained ``archived`` event
(links and all, as the old call wrote it) that removed a round from the middle, or the oldest
rounds while they were young, naming a made-up archive; and the casino's copy of the feed
holding rounds the journal calls archived. Retention removes only the oldest rounds, older than
a day; ``audit verify`` holds every ``archived`` event to that; ``--feed`` checks an archived
round against its archive, and without the archive it is a finding."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controller.audit import verify_journal
from controller.clock import iso
from controller.journal import Journal, JournalError
from controller.journal.audit import read_feed, verify_feed
from controller.journal.maintenance import archive_rounds
from controller.journal.store import chain_link, to_json
from tests.journal.conftest import cli, copy_journal
from tests.journal.test_audit_attacks import casino_feed

LATER = datetime.now(UTC) + timedelta(days=2)  # the demo's rounds are two days old by then


def _round_ids(path: Path, seqs: Sequence[int]) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [
            str(conn.execute("SELECT round_id FROM rounds WHERE seq = ?", (s,)).fetchone()[0])
            for s in seqs
        ]


def _runs(ids: Sequence[int]) -> list[list[int]]:
    """Sorted ids as [first, last] runs, as the retention call writes them (the attacker has
    our source)."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


def _forge_archived(path: Path, seqs: Sequence[int], before: datetime) -> None:
    """What the old ``delete_archived`` did, by hand on the file with our source: the rows
    deleted and a chained ``archived`` event naming them, their links and a made-up archive."""
    rids = _round_ids(path, seqs)
    with sqlite3.connect(path) as conn:
        ids = sorted(
            int(i)
            for r in rids
            for (i,) in conn.execute("SELECT id FROM events WHERE round_id = ?", (r,))
        )
        runs = _runs(ids)
        links = {
            str(b): conn.execute("SELECT chain FROM events WHERE id = ?", (b,)).fetchone()[0]
            for _a, b in runs
        }
        for r in rids:
            conn.execute("DELETE FROM events WHERE round_id = ?", (r,))
            conn.execute("DELETE FROM rounds WHERE round_id = ?", (r,))
        record = {
            "rounds": len(rids),
            "event_ids": runs,
            "round_seqs": [[min(seqs), max(seqs)]],
            "links": links,
            "before": iso(before),
            "newest_opened_at": iso(before - timedelta(days=1)),
            "archive": "PG-DEMO-made-up.jsonl.gz",
            "sha256": "0" * 64,
        }
        # Chained as the journal chains an event: linked to the newest link (chain_link).
        (head,) = conn.execute(
            "SELECT chain FROM events WHERE chain IS NOT NULL ORDER BY id DESC LIMIT 1"
        ).fetchone()
        at, text = iso(LATER), to_json(record)
        row = conn.execute(
            "INSERT INTO events (round_id, at, kind, payload) VALUES (NULL, ?, 'archived', ?)",
            (at, text),
        ).lastrowid
        assert row is not None
        link = chain_link(head, row, None, at, "archived", text)
        conn.execute("UPDATE events SET chain = ? WHERE id = ?", (link, row))


def _lines(report_findings: Sequence[object]) -> str:
    return "\n".join(f.line() for f in report_findings)  # type: ignore[attr-defined]


def test_the_retention_call_refuses_a_round_from_the_middle(
    demo_journal: Path, tmp_path: Path
) -> None:
    path = copy_journal(demo_journal, tmp_path)
    [middle] = _round_ids(path, [3])
    with Journal.open(path, "PG-DEMO", clock=lambda: LATER) as journal:
        old = iso(LATER - timedelta(days=1))
        with (
            pytest.raises(JournalError, match="only the oldest rounds"),
            journal.transaction() as tx,
        ):
            tx.delete_archived([middle], [], ("made-up.jsonl.gz", "0" * 64), before=old)
        with (
            pytest.raises(JournalError, match="day"),  # nothing younger than a day
            journal.transaction() as tx,
        ):
            tx.delete_archived(_round_ids(path, [1]), [], before=iso(LATER))
    assert verify_journal(path).ok and _round_ids(path, [3]) == [middle]


def test_audit_verify_finds_a_round_archived_from_the_middle(
    demo_journal: Path, tmp_path: Path
) -> None:
    path = copy_journal(demo_journal, tmp_path)
    _forge_archived(path, [3], LATER - timedelta(days=30))
    report = verify_journal(path)
    assert not report.ok
    assert "retention removes only the oldest rounds" in _lines(report.findings)
    done = cli("audit", "verify", "--journal", str(path))
    assert done.returncode == 1 and "only the oldest rounds" in done.stderr


def test_audit_verify_finds_young_rounds_archived(demo_journal: Path, tmp_path: Path) -> None:
    path = copy_journal(demo_journal, tmp_path)
    _forge_archived(path, [1, 2], LATER)  # the oldest, but the cutoff is the moment itself
    found = _lines(verify_journal(path).findings)
    assert "removed rows younger than 1 day(s)" in found


def test_audit_verify_holds_a_cut_off_to_the_journal_s_own_times(
    demo_journal: Path, tmp_path: Path
) -> None:
    """Issue 39: the oldest round removed by a chained ``archived`` event that claims a cut-off
    in 2020, its newest round opened in 2019, while the journal's rows kept from before it were
    written today. The cut-off is older than what the journal itself says of that time."""
    path = copy_journal(demo_journal, tmp_path)
    _forge_archived(path, [1], datetime(2020, 1, 1, tzinfo=UTC))
    found = _lines(verify_journal(path).findings)
    assert "the cut-off is not the journal's own time" in found
    assert "removed rows younger" not in found and "oldest rounds" not in found
    done = cli("audit", "verify", "--journal", str(path))
    assert done.returncode == 1 and "not the journal's own time" in done.stderr


def test_an_honest_archive_is_no_finding_of_the_cut_off(demo_journal: Path, tmp_path: Path) -> None:
    path = copy_journal(demo_journal, tmp_path)
    with Journal.open(path, "PG-DEMO", clock=lambda: LATER) as journal:
        before = LATER - timedelta(days=1)
        report = archive_rounds(journal, before=before, directory=tmp_path / "a", now=LATER)
    assert report.rounds >= 1
    verified = verify_journal(path)
    assert verified.ok, _lines(verified.findings)


def test_the_feed_holds_archived_rounds_to_their_archive(
    demo_journal: Path, tmp_path: Path
) -> None:
    feed = casino_feed(demo_journal)
    path = copy_journal(demo_journal, tmp_path)
    with Journal.open(path, "PG-DEMO", clock=lambda: LATER) as journal:
        report = archive_rounds(journal, before=LATER, directory=tmp_path / "a", batch=4, now=LATER)
    assert report.rounds >= 7 and verify_journal(path).ok
    # The casino's copy holds rounds the journal calls archived: without the archive, findings.
    unchecked = verify_feed(path, read_feed(feed))
    assert unchecked.archived == report.rounds and len(unchecked.findings) == report.rounds
    assert "no archive given holds it" in _lines(unchecked.findings)
    # With the archive, each is checked as the table sent it.
    assert not verify_feed(path, read_feed(feed), archives=[tmp_path / "a"]).findings
    # An archive rewritten (a result changed, its trailer and sidecar made to match) no longer
    # is the file the journal's chained event names: its rounds are findings again.
    [first, *_] = sorted((tmp_path / "a").glob("*.jsonl.gz"))
    lines = gzip.decompress(first.read_bytes()).decode().splitlines(keepends=True)
    body = [json.loads(line) for line in lines[:-1]]
    for item in body:
        if item.get("type") == "round" and item.get("status") == "settled":
            item["result"]["dealer"]["two_jacks"] = not item["result"]["dealer"]["two_jacks"]
            break
    text = "".join(json.dumps(i, separators=(",", ":")) + "\n" for i in body)
    trailer = {
        "type": "trailer",
        "lines": len(body),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
    first.write_bytes(gzip.compress((text + json.dumps(trailer) + "\n").encode(), mtime=0))
    sidecar = first.with_name(first.name + ".sha256")
    sidecar.write_text(f"{hashlib.sha256(first.read_bytes()).hexdigest()}  {first.name}\n")
    assert cli("journal", "verify-archive", str(first)).returncode == 0  # on its own: fine
    rewritten = verify_feed(path, read_feed(feed), archives=[tmp_path / "a"])
    assert rewritten.findings and "no archive given holds it" in _lines(rewritten.findings)
    # journal verify-archive with the journal: the file is not the one the journal names.
    done = cli("journal", "verify-archive", "--journal", str(path), str(first))
    assert done.returncode == 1 and "no archived event of the journal names" in done.stderr


def test_verify_archive_with_the_journal_checks_what_the_event_removed(
    demo_journal: Path, tmp_path: Path
) -> None:
    path = copy_journal(demo_journal, tmp_path)
    with Journal.open(path, "PG-DEMO", clock=lambda: LATER) as journal:
        report = archive_rounds(journal, before=LATER, directory=tmp_path / "a", now=LATER)
    [file] = report.files
    done = cli("journal", "verify-archive", "--journal", str(path), str(file))
    assert done.returncode == 0, done.stderr
    assert "names it and its rows" in done.stdout
