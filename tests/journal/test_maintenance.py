"""controller/journal/maintenance.py and `paigow-table journal …`: real damaged files (garbage,
truncated, a page overwritten), salvage around the damage, and retention into checksummed
archives that only then leave the journal."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.journal import Journal, OutboxMessage
from controller.journal.archive_file import read_archive
from controller.journal.maintenance import (
    EXIT_DAMAGED,
    EXIT_MISSING,
    EXIT_UNREADABLE,
    ArchiveReport,
    archive_rounds,
    check_journal,
    salvage_journal,
    verify_archive,
)

TABLE = "PG-M1"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def write_journal(
    path: Path,
    rounds: int,
    *,
    pending: AbstractSet[int] = frozenset(),
    gap: timedelta = timedelta(hours=1),
) -> Clock:
    """A journal of ``rounds`` settled rounds an hour apart, each with three events and a loose
    alarm between rounds; rounds numbered in ``pending`` keep a message in the outbox."""
    clock = Clock()
    with Journal.open(path, TABLE, clock=clock) as j:
        for n in range(1, rounds + 1):
            rid = f"{TABLE}-R{n:06d}"
            with j.transaction() as tx:
                tx.open_round(rid, n)
                for kind in ("deal_started", "packet_dealt", "stub_verified"):
                    tx.record_event(kind, {"n": n, "pad": "x" * 200}, rid)
                outbox = [OutboxMessage("t/round", {"n": n})] if n in pending else []
                tx.close_round(rid, "settled", None, {"round": n, "result": "push"}, outbox)
                tx.record_event("alarm", {"code": "frame_error", "n": n})
            clock.now += gap
    return clock


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "journal", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- check -------------------------------------------------------------------------------------


def test_a_sound_journal_checks_ok_even_while_open_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    write_journal(path, 20)
    with Journal.open(path, TABLE) as writer:  # the daemon holds it open in WAL mode
        with writer.transaction() as tx:
            tx.record_event("tick", {"n": 0})
        result = check_journal(path)
    assert result.ok and result.status == 0 and result.mode == "integrity_check"
    assert result.rounds == 20 and result.events == 20 * 5 + 1  # 3, the seal, an alarm; a tick
    assert "ok" in result.summary()
    assert check_journal(path, full_check_max_bytes=1).mode == "quick_check"


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("garbage", "not a database"),
        ("truncated", "malformed"),
        ("newer_schema", "written by a newer paigow-table (journal schema 99"),
        ("not_ours", "not a table journal"),
    ],
)
def test_each_kind_of_damage_is_one_line_and_never_raises(
    tmp_path: Path, damage: str, expected: str
) -> None:
    path = tmp_path / "j.sqlite3"
    if damage == "garbage":
        path.write_bytes(random.Random(1).randbytes(64 * 1024))
    elif damage == "truncated":
        write_journal(path, 200)
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
    elif damage == "newer_schema":
        write_journal(path, 2)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    else:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE notes (x)")
    result = check_journal(path)
    assert not result.ok and result.status == EXIT_DAMAGED
    line = result.summary()
    assert "\n" not in line and expected in line and "salvage" in line
    if damage == "newer_schema":  # a downgrade, not damage: never told to salvage it
        assert "must not be salvaged" in line and "is damaged" not in line


def test_a_journal_that_cannot_be_opened_is_unreadable_not_damaged(tmp_path: Path) -> None:
    (tmp_path / "a-directory").mkdir()
    result = check_journal(tmp_path / "a-directory")
    assert result.unreadable and result.status == EXIT_UNREADABLE
    assert "cannot be read" in result.summary() and "not damage" in result.summary()


def test_a_missing_journal_is_not_created(tmp_path: Path) -> None:
    result = check_journal(tmp_path / "none.sqlite3")
    assert result.missing and result.status == EXIT_MISSING
    assert not (tmp_path / "none.sqlite3").exists()


def _corrupt_a_page(path: Path, page: int) -> None:
    size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    with open(path, "r+b") as f:
        f.seek(page * size)
        f.write(random.Random(page).randbytes(size))


def test_one_corrupted_page_is_found_and_salvage_loses_only_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    write_journal(path, 300)
    pages = sqlite3.connect(path).execute("PRAGMA page_count").fetchone()[0]
    _corrupt_a_page(path, pages // 2)
    found = check_journal(path)
    assert not found.ok and found.status == EXIT_DAMAGED

    out = tmp_path / "salvaged.sqlite3"
    report = salvage_journal(path, out)
    lost = {t: sum(b - a + 1 for a, b in r if b >= a) for t, r in report.skipped.items()}
    total = {"rounds": 300, "events": 300 * 5}
    for table, count in total.items():
        assert report.copied[table] + lost[table] >= count - 60, (table, report.lines())
    assert sum(report.copied[t] for t in total) >= sum(total.values()) - 60  # one page's rows
    after = check_journal(out)
    assert after.ok, after.summary()
    # What was copied is what was written: every salvaged round is intact.
    with sqlite3.connect(out) as conn:
        for rid, result in conn.execute("SELECT round_id, result FROM rounds"):
            assert json.loads(result)["round"] == int(rid.rsplit("R", 1)[1])
    with pytest.raises(Exception, match="exists"):
        salvage_journal(path, out)


def test_the_cli_check_and_salvage(tmp_path: Path) -> None:
    good = tmp_path / "good.sqlite3"
    write_journal(good, 5)
    done = run_cli("check", "--journal", str(good))
    assert done.returncode == 0 and "5 rounds" in done.stdout
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"\0garbage" * 4096)
    done = run_cli("check", "--journal", str(bad))
    assert done.returncode == 65 and len(done.stderr.splitlines()) == 1
    assert run_cli("check", "--journal", str(tmp_path / "none")).returncode == 66
    shutil.copy(good, tmp_path / "copy.sqlite3")
    _corrupt_a_page(tmp_path / "copy.sqlite3", 3)
    done = run_cli(
        "salvage", "--journal", str(tmp_path / "copy.sqlite3"), "--out", str(tmp_path / "s.db")
    )
    assert done.returncode == 0, done.stderr
    assert "rows copied" in done.stdout and "ok" in done.stdout.splitlines()[-1]


# --- archive -----------------------------------------------------------------------------------


def test_old_rounds_go_to_a_checksummed_archive_then_leave_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    clock = write_journal(path, 48, pending={3, 4})  # two days of rounds, an hour apart
    archive = tmp_path / "archive"
    with Journal.open(path, TABLE, clock=clock) as j:
        before_rounds = {r.round_id: r for r in j.history.recent_rounds(100)}
        cutoff = T0 + timedelta(hours=24)  # the first day
        first = archive_rounds(j, before=cutoff, directory=archive, batch=10)
        # Only the oldest go: round 3's message still waits, so rounds 1–2 and nothing after.
        assert first.rounds == 2 and first.kept_pending == 2
        left = {r.round_id for r in j.history.recent_rounds(100)}
        assert len(left) == 48 - 2
        assert {f"{TABLE}-R{n:06d}" for n in (3, 4)} <= left
        # A second run finds nothing new (the pending ones still wait).
        again = archive_rounds(j, before=cutoff, directory=archive, batch=10)
        assert again.rounds == 0 and again.files == ()
        for message in j.outbox.pending():  # the broker acknowledged rounds 3 and 4
            j.outbox.ack(message.msg_id)
        rest = archive_rounds(j, before=cutoff, directory=archive, batch=10)
        assert rest.rounds == 22 and rest.kept_pending == 0
        left = {r.round_id for r in j.history.recent_rounds(100)}
        assert len(left) == 48 - 24
        assert j.upkeep.integrity_check() == ["ok"]
    report = ArchiveReport(first.files + rest.files, 24)
    assert len(report.files) == 4  # rounds 1–2, then batches of 10
    archived: dict[str, dict[str, Any]] = {}
    loose = 0
    for file in report.files:
        ok, line = verify_archive(file)
        assert ok, line
        check = subprocess.run(
            ["sha256sum", "-c", file.name + ".sha256"], cwd=file.parent, capture_output=True
        )
        assert check.returncode == 0
        for raw in gzip.decompress(file.read_bytes()).decode().splitlines()[1:-1]:
            item = json.loads(raw)
            if item["type"] == "round":
                archived[item["round_id"]] = item
            else:
                loose += 1
    assert set(archived) == set(before_rounds) - left
    for rid, item in archived.items():
        assert item["result"] == before_rounds[rid].result
        assert [e["kind"] for e in item["events"]][-1] == "round_sealed" and len(
            item["events"]
        ) == 4
    assert loose == 24  # the alarms between rounds of the first day


def test_a_tampered_archive_fails_verification(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    clock = write_journal(path, 5)
    clock.now += timedelta(days=2)  # retention removes nothing younger than a day
    with Journal.open(path, TABLE, clock=clock) as j:
        [file] = archive_rounds(j, before=clock.now, directory=tmp_path / "a").files
    lines = gzip.decompress(file.read_bytes()).decode().splitlines(keepends=True)
    lines[1] = lines[1].replace('"push"', '"win"')
    file.write_bytes(gzip.compress("".join(lines).encode()))
    ok, line = verify_archive(file)
    assert not ok and "sha256" in line.lower()
    os.remove(file.with_name(file.name + ".sha256"))  # without the sidecar: the trailer catches it
    ok, line = verify_archive(file)
    assert not ok and "trailer" in line
    done = run_cli("verify-archive", str(file))
    assert done.returncode == 1


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ages=st.lists(st.integers(min_value=0, max_value=200), min_size=1, max_size=30),
    pending=st.sets(st.integers(min_value=1, max_value=30), max_size=5),
    keep_days=st.integers(min_value=1, max_value=150),
)
def test_exactly_the_old_closed_sent_rounds_are_archived(
    tmp_path_factory: pytest.TempPathFactory, ages: list[int], pending: set[int], keep_days: int
) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    now = T0 + timedelta(days=300)
    clock = Clock()
    expected_gone: set[str] = set()
    with Journal.open(tmp / "j.sqlite3", TABLE, clock=clock) as j:
        for n, age in enumerate(sorted(ages, reverse=True), start=1):
            clock.now = now - timedelta(days=age, minutes=n)
            rid = f"{TABLE}-P{n:04d}"
            with j.transaction() as tx:
                tx.open_round(rid, n)
                outbox = [OutboxMessage("t/round", {"n": n})] if n in pending else []
                tx.close_round(rid, "dead", "short_packet", {"n": n}, outbox)
            # Only a prefix goes: the oldest rounds up to the first one still waiting or young.
            if (
                clock.now < now - timedelta(days=keep_days)
                and n not in pending
                and (len(expected_gone) == n - 1)
            ):
                expected_gone.add(rid)
        before = {r.round_id for r in j.history.recent_rounds(100)}
        clock.now = now
        archive_rounds(j, before=now - timedelta(days=keep_days), directory=tmp / "a", batch=7)
        after = {r.round_id for r in j.history.recent_rounds(100)}
    assert before - after == expected_gone


def test_an_online_backup_verifies_rotates_and_refuses_a_copy_that_does_not_verify(
    tmp_path: Path,
) -> None:
    """`paigow-table journal backup` (the daily timer's command): a copy made while the journal
    is open for writing, checked like `audit verify`, the oldest rotated out; a journal whose
    chain was edited gives a `.bad` copy and exit 1, removing nothing."""
    from controller.journal.maintenance import backup_journal

    journal = tmp_path / "journal.sqlite3"
    out = tmp_path / "backups"
    with Journal.open(journal, "PG-B") as j:
        for n in range(3):
            with j.transaction() as tx:
                tx.record_event("tick", {"n": n})
        # Made while the journal is open (and its latest commits in the WAL).
        reports = [
            backup_journal(journal, out, keep=2, now=datetime(2026, 11, day, tzinfo=UTC))
            for day in (1, 2, 3)
        ]
    assert all(r.ok for r in reports), [r.detail for r in reports]
    assert sorted(p.name for p in out.iterdir()) == [
        "journal-20261102T000000Z.sqlite3",
        "journal-20261103T000000Z.sqlite3",
    ]
    assert reports[-1].removed == (out / "journal-20261101T000000Z.sqlite3",)
    with sqlite3.connect(out / "journal-20261103T000000Z.sqlite3") as copy:
        assert copy.execute("SELECT count(*) FROM events WHERE kind = 'tick'").fetchone() == (3,)
    with sqlite3.connect(journal) as conn:
        conn.execute("UPDATE events SET payload = '{\"n\":9}' WHERE kind = 'tick' AND id = 2")
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", "journal", "backup", "--journal", str(journal),
         "--to", str(out), "--keep", "2"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "does not verify" in done.stderr
    assert len(list(out.glob("*.bad"))) == 1 and len(list(out.glob("*.sqlite3"))) == 2


def test_a_planted_non_ascii_signature_is_a_mismatch_not_a_traceback(tmp_path: Path) -> None:
    """An archive's trailer whose hmac an adversary made non-ASCII (and re-hashed so every other
    check passes): 'not signed with this key', never a TypeError from compare_digest."""
    path = tmp_path / "j.sqlite3"
    clock = write_journal(path, 3)
    clock.now += timedelta(days=2)
    with Journal.open(path, TABLE, clock=clock) as j:
        [file] = archive_rounds(j, before=clock.now, directory=tmp_path / "a").files
    os.remove(file.with_name(file.name + ".sha256"))
    lines = gzip.decompress(file.read_bytes()).decode().splitlines(keepends=True)
    trailer = json.loads(lines[-1])
    trailer["hmac_sha256"] = "é" * 64
    lines[-1] = json.dumps(trailer) + "\n"
    file.write_bytes(gzip.compress("".join(lines).encode()))
    ok, line, _ = read_archive(file, key=bytes(32))
    assert not ok and "not signed with this key" in line
