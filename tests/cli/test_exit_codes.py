"""Exit statuses a script can trust (docs/audit.md, "Exit statuses"; issue 32): a finding is 1;
a wrong path, a file that is not what the command reads, or bad arguments each have their own
status and one line on stderr, never a traceback. Each command is run as a person runs it, in
its own process, against a journal the demo dealt through the real daemon."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import command_parser

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    """The command exited ``status`` with one line on stderr naming ``words``, and no traceback."""
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("exits") / "demo.sqlite3"
    done = run(
        "demo", "--rounds", "3", "--no-mqtt", "--journal", str(path), "--interval", "0",
        "--seed", "5", "--http-port", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture
def not_a_journal(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("the shift's notes, not a journal\n")
    return path


@pytest.mark.parametrize("command", [["audit", "verify"], ["audit", "recall"]])
def test_a_wrong_path_is_66_and_one_line(command: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "no-such.sqlite3"
    refused(run(*command, "--journal", str(missing)), 66, str(missing), "no such file")
    refused(run(*command, "--journal", str(tmp_path)), 66, "is a directory")
    assert not missing.exists()


@pytest.mark.parametrize("command", [["audit", "verify"], ["audit", "recall"]])
def test_a_file_that_is_not_a_journal_is_65(
    command: list[str], not_a_journal: Path, tmp_path: Path
) -> None:
    refused(run(*command, "--journal", str(not_a_journal)), 65, "not a table's journal")
    other = tmp_path / "other.sqlite3"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    refused(run(*command, "--journal", str(other)), 65, "not a table's journal", "events")


def test_a_finding_is_1_and_a_sound_journal_0(journal: Path, tmp_path: Path) -> None:
    assert run("audit", "verify", "--journal", str(journal)).returncode == 0
    edited = tmp_path / "edited.sqlite3"
    edited.write_bytes(journal.read_bytes())
    with sqlite3.connect(edited) as conn:
        conn.execute("UPDATE rounds SET result = replace(result, '\"pays\"', '\"pais\"')")
    done = run("audit", "verify", "--journal", str(edited))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_recall_says_what_matched_nothing(journal: Path) -> None:
    line = refused(
        run("audit", "recall", "--journal", str(journal), "--round", "NOPE"), 1, "'NOPE'"
    )
    assert "it holds 3 rounds" in line
    line = refused(
        run("audit", "recall", "--journal", str(journal), "--since", "2030-01-01"), 1, "2030-01-01"
    )
    assert "it holds 3 rounds" in line
    found = run("audit", "recall", "--journal", str(journal), "--since", "2020-01-01T00:00+01:00")
    assert found.returncode == 0 and found.stdout.count("Round #") == 3


@pytest.mark.parametrize("option", ["--since", "--until"])
def test_recall_refuses_a_time_that_is_not_one(journal: Path, option: str) -> None:
    done = run("audit", "recall", "--journal", str(journal), option, "yesterday")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"argument {option}: not an ISO 8601 time: 'yesterday'" in done.stderr


def test_journal_commands_never_create_a_journal_at_a_typo(tmp_path: Path) -> None:
    """`journal archive` on a wrong path used to create an empty journal there and say
    "archived 0 rounds"; salvage made an empty copy and exited 0."""
    typo = tmp_path / "jounral.sqlite3"
    out = tmp_path / "new.sqlite3"
    for command in (
        ["journal", "archive", "--journal", str(typo), "--table-id", "PG-07",
         "--older-than-days", "1"],
        ["journal", "salvage", "--journal", str(typo), "--out", str(out)],
        ["journal", "backup", "--journal", str(typo), "--to", str(tmp_path / "backups")],
        ["audit", "export", "--journal", str(typo), "--since", "2026-01-01",
         "--out", str(tmp_path / "x.jsonl.gz")],
    ):  # fmt: skip
        refused(run(*command), 66, str(typo))
    assert sorted(tmp_path.iterdir()) == []
    refused(run("journal", "check", "--journal", str(typo)), 66, str(typo))


def test_journal_backup_names_the_file_it_kept(journal: Path, tmp_path: Path) -> None:
    done = run("journal", "backup", "--journal", str(journal), "--to", str(tmp_path))
    assert done.returncode == 0, done.stderr
    [kept] = list(tmp_path.glob("*.sqlite3"))
    assert done.stdout.startswith(f"{kept}: journal {kept}: ok"), done.stdout
    assert ".part" not in done.stdout


def test_a_way_file_missing_or_not_a_way(not_a_journal: Path, tmp_path: Path) -> None:
    refused(run("house-way", "check", str(tmp_path / "nope.toml")), 66, "nope.toml")
    refused(run("house-way", "check", str(not_a_journal)), 65, f"{not_a_journal}:1")
    refused(run("house-way", "diff", "classic", str(tmp_path / "b.toml")), 66, "b.toml")
    refused(run("house-way", "--way", str(tmp_path / "w.toml"), "As", "Kd"), 66, "w.toml")


def test_pit_commands(tmp_path: Path) -> None:
    refused(run("pit", "run", "--config", str(tmp_path / "pit.toml")), 66, "pit.toml")
    example = str(REPO / "config" / "pit.example.toml")
    refused(run("pit", "verify-report", "--config", example, str(tmp_path / "r.json")), 66)


def test_house_way_verbs_take_options_anywhere_and_have_their_own_help() -> None:
    parser = command_parser()
    args = parser.parse_args(["house-way", "check", "--json", "classic"])
    assert (args.file, args.json) == ("classic", True)
    args = parser.parse_args(["house-way", "diff", "--workers", "2", "classic", "dealer-open"])
    assert (args.a, args.b, args.workers) == ("classic", "dealer-open", 2)
    args = parser.parse_args(["--wheel", "lowest", "house-way", "--json", "check", "w.toml"])
    assert (args.file, args.json, args.wheel) == ("w.toml", True, "lowest")
    assert parser.parse_args(["house-way", "As", "Kd", "--json"]).cards == ["As", "Kd"]
    done = run("house-way", "check", "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: paigow-table house-way check ")
    assert "exit statuses:" in done.stdout


@pytest.mark.parametrize(
    "command",
    [[], ["audit", "verify"], ["audit", "recall"], ["journal", "check"], ["house-way"],
     ["house-way", "diff"], ["pit", "run"]],
)  # fmt: skip
def test_every_help_says_the_exit_statuses(command: list[str]) -> None:
    done = run(*command, "--help")
    assert done.returncode == 0
    assert "exit statuses: 0 nothing found; 1 a finding" in " ".join(done.stdout.split())


def test_journal_archive_names_the_cut_off_it_applies_and_only_its_own_table(
    journal: Path, tmp_path: Path
) -> None:
    """Issue 39: ``--older-than-days 0`` printed a cut-off it did not apply (retention keeps a
    day), and another table's id was taken."""
    import shutil
    from datetime import UTC, datetime, timedelta

    copy = tmp_path / "j.sqlite3"
    shutil.copy(journal, copy)
    with sqlite3.connect(copy) as conn:
        (table,) = conn.execute("SELECT table_id FROM rounds LIMIT 1").fetchone()
    line = refused(
        run(
            "journal",
            "archive",
            "--journal",
            str(copy),
            "--table-id",
            "PG-99",
            "--older-than-days",
            "1",
        ),
        2,
        table,
        "PG-99",
    )
    assert "--table-id" in line
    done = run("journal", "archive", "--journal", str(copy), "--table-id", table,
               "--older-than-days", "0", "--to", str(tmp_path / "a"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip().splitlines()[-1]
    assert "(retention keeps at least a day)" in said, said
    stamp = said.split("opened before ", 1)[1][:19]
    applied = datetime.fromisoformat(stamp).replace(tzinfo=UTC)
    assert abs(applied - (datetime.now(UTC) - timedelta(days=1))) < timedelta(minutes=5)
