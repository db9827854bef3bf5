"""One exit-code rule, everywhere (issue 39; docs/audit.md "Exit statuses"): every command of
`paigow-table --help` and `paigow-table pit --help`, run as a person runs it, with a missing
file, a directory where a file is meant, a file it cannot read, a database that is missing or
down, a broker that is down and a bad argument, exits with the documented status and says so in
ONE line on stderr, never a traceback. The table of cases must name every command the help
lists: a new command fails here until its case is written.

"A file it cannot read" is made unreadable by its mode; the suite runs as root in CI, so the
command runs without the capabilities that let root read anything (``setpriv``)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MISSING, DIRECTORY, UNREADABLE = "missing", "directory", "unreadable"
#: What each way a file can be wrong exits with.
FILE_STATUS = {MISSING: 66, DIRECTORY: 66, UNREADABLE: 74}

#: Each command (its words) and, for each thing that can be wrong, the command line that has it
#: wrong ({F}: the file) and the status it must exit with. ``file`` rows are run three times.
CASES: dict[str, list[tuple[str, list[str], int | None]]] = {
    "house-way": [
        ("file", ["house-way", "--way", "{F}", "As", "Kd", "7h", "5s", "3c", "2d", "JK"], None),
        ("bad", ["house-way", "--way"], 2),
    ],
    "house-way check": [("file", ["house-way", "check", "{F}"], None)],
    "house-way diff": [("file", ["house-way", "diff", "classic", "{F}"], None)],
    "run": [("file", ["run", "--config", "{F}"], None), ("bad", ["run"], 2)],
    "check-config": [("file", ["check-config", "{F}"], None), ("bad", ["check-config"], 2)],
    "demo": [("bad", ["demo", "--rounds", "many"], 2)],
    "kiosk": [("bad", ["kiosk", "--wait", "soon"], 2)],
    "journal check": [("file", ["journal", "check", "--journal", "{F}"], None)],
    "journal salvage": [
        ("file", ["journal", "salvage", "--journal", "{F}", "--out", "{OUT}/new.sqlite3"], None)
    ],
    "journal archive": [
        (
            "file",
            [
                "journal",
                "archive",
                "--journal",
                "{F}",
                "--table-id",
                "PG-01",
                "--older-than-days",
                "2",
            ],
            None,
        ),
        ("bad", ["journal", "archive", "--journal", "j", "--table-id", "PG-01"], 2),
    ],
    "journal verify-archive": [("file", ["journal", "verify-archive", "{F}"], None)],
    "journal backup": [
        ("file", ["journal", "backup", "--journal", "{F}", "--to", "{OUT}/backups"], None)
    ],
    "dealer-pin": [("bad", ["dealer-pin"], 2)],
    "supervisor-pin": [("bad", ["supervisor-pin"], 2)],
    "authenticate": [
        ("file", ["authenticate", "--nonce", "regulator-1", "--config", "{F}"], None),
        ("bad", ["authenticate"], 2),
    ],
    "software": [("bad", ["software", "inspect"], 2)],
    "audit verify": [("file", ["audit", "verify", "--journal", "{F}"], None)],
    "audit recall": [("file", ["audit", "recall", "--journal", "{F}"], None)],
    "audit export": [
        (
            "file",
            [
                "audit",
                "export",
                "--journal",
                "{F}",
                "--since",
                "2026-01-01",
                "--out",
                "{OUT}/x.jsonl.gz",
            ],
            None,
        ),
        ("bad", ["audit", "export", "--journal", "j", "--since", "yesterday", "--out", "x"], 2),
    ],
    "analyze chan-chu": [("bad", ["analyze", "chan-chu", "--paytable", "PT99"], 2)],
    "analyze dealer-jacks": [("bad", ["analyze", "dealer-jacks", "--nope"], 2)],
    "analyze base-game": [("bad", ["analyze", "base-game", "--rounds", "lots"], 2)],
    "analyze jacks-beat": [("bad", ["analyze", "jacks-beat", "--paytable", "Z"], 2)],
    "analyze ace-high": [("bad", ["analyze", "ace-high", "--rounds", "x"], 2)],
    "analyze report": [("bad", ["analyze", "report", "--rounds", "x"], 2)],
    "monitor": [
        ("file", ["monitor", "--broker", "{BROKER}", "--password-file", "{F}"], None),
        ("broker", ["monitor", "--broker", "{BROKER}"], 69),
        ("bad", ["monitor", "--count", "many"], 2),
    ],
    "schemas": [("missing-dir", ["schemas", "--check", "--output", "{OUT}/none"], 66)],
    "sign-command": [
        (
            "file",
            [
                "sign-command",
                "void_round",
                "{}",
                "--table-id",
                "PG-01",
                "--keys-file",
                "{F}",
                "--key-id",
                "k",
            ],
            None,
        ),
        (
            "bad",
            [
                "sign-command",
                "vod",
                "{}",
                "--table-id",
                "PG-01",
                "--keys-file",
                "{KEYS}",
                "--key-id",
                "casino",
            ],
            2,
        ),
        (
            "bad",
            [
                "sign-command",
                "void_round",
                '{"reason": 5}',
                "--table-id",
                "PG-01",
                "--keys-file",
                "{KEYS}",
                "--key-id",
                "casino",
            ],
            2,
        ),
    ],
    "feed-key": [
        ("file", ["feed-key", "show", "--key-file", "{F}"], None),
        ("file", ["feed-key", "show", "--config", "{F}"], None),
        ("bad", ["feed-key", "rotate"], 2),
    ],
    "pit run": [("file", ["pit", "run", "--config", "{F}"], None)],
    "pit check-config": [("file", ["pit", "check-config", "{F}"], None)],
    "pit migrate": [("database", ["pit", "migrate", "--config", "{PIT_DOWN}"], 69)],
    "pit export": [
        (
            "database",
            ["pit", "export", "--config", "{PIT_DOWN}", "--table", "PG-01", "--output", "-"],
            69,
        ),
        (
            "database",
            ["pit", "export", "--config", "{PIT_NO_FILE}", "--table", "PG-01", "--output", "-"],
            66,
        ),
    ],
    "pit shift": [
        ("database", ["pit", "shift", "--config", "{PIT_DOWN}"], 69),
        ("database", ["pit", "shift", "--config", "{PIT_NO_FILE}"], 66),
        ("file", ["pit", "shift", "--config", "{F}"], None),
    ],
    "pit report": [
        ("database", ["pit", "report", "--config", "{PIT_DOWN}", "--output", "{OUT}/r"], 69),
    ],
    "pit verify-report": [
        ("file", ["pit", "verify-report", "--config", "{PIT_DOWN}", "{F}"], None)
    ],
    "pit demo": [
        (
            "database",
            [
                "pit",
                "demo",
                "--tables",
                "1",
                "--http-port",
                "0",
                "--database",
                "postgresql://paigow@127.0.0.1:{DOWN}/pit",
            ],
            69,
        ),
    ],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _commands(*words: str) -> list[str]:
    """The commands a --help lists (the lines under its COMMAND)."""
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", *words, "--help"],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=True,
    )  # fmt: skip
    return re.findall(r"^ {4}([a-z][a-z0-9-]*)(?: |$)", done.stdout, re.MULTILINE)


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The files each case names: missing, a directory, an unreadable file, and pit configs
    whose database is down (nothing listens on its port) or a SQLite file that is not there."""
    root = tmp_path_factory.mktemp("every")
    (root / DIRECTORY).mkdir()
    unreadable = root / UNREADABLE
    unreadable.write_text("secret\n")
    unreadable.chmod(0o000)
    down = _free_port()
    keys = root / "report.key"
    keys.write_text("ab" * 32 + "\n")
    keys.chmod(0o600)
    pit_down = root / "pit-down.toml"
    pit_down.write_text(
        f'[site]\nid = "demo"\n[broker]\nport = {_free_port()}\n[database]\n'
        f'url = "postgresql://paigow@127.0.0.1:{down}/pit"\n[web]\nenabled = false\n'
        f'[shift]\nreport_key_file = "{keys}"\n'
    )
    pit_no_file = root / "pit-no-file.toml"
    pit_no_file.write_text(
        f'[site]\nid = "demo"\n[broker]\nport = {_free_port()}\n[database]\n'
        f'url = "sqlite:///{root}/none/pit.sqlite3"\n[web]\nenabled = false\n'
    )
    command_keys = root / "command-keys"
    command_keys.write_text("casino hmac-sha256 " + "cd" * 32 + "\n")
    command_keys.chmod(0o600)
    yield {
        "OUT": str(root / "out"),
        "BROKER": f"127.0.0.1:{_free_port()}",
        "PIT_DOWN": str(pit_down),
        "PIT_NO_FILE": str(pit_no_file),
        "DOWN": str(down),
        "KEYS": str(command_keys),
        MISSING: str(root / "no-such-file"),
        DIRECTORY: str(root / DIRECTORY),
        UNREADABLE: str(unreadable),
    }
    shutil.rmtree(root, ignore_errors=True)


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "controller.cli", *argv]
    if os.geteuid() == 0:  # root reads any file: run without the capabilities that allow it
        drop = "-dac_override,-dac_read_search"
        command = ["setpriv", "--inh-caps", drop, "--bounding-set", drop, *command]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, cwd=REPO, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _cases() -> Iterator[tuple[str, str, list[str], int]]:
    for name, rows in CASES.items():
        for kind, argv, status in rows:
            if kind == "file":
                for wrong, code in FILE_STATUS.items():
                    yield name, wrong, argv, code
            else:
                assert status is not None
                yield name, kind, argv, status


@pytest.mark.parametrize(
    ("name", "wrong", "argv", "status"),
    list(_cases()),
    ids=[f"{n} {w} {i}" for i, (n, w, _a, _s) in enumerate(_cases())],
)
def test_the_documented_status_in_one_line(
    places: dict[str, str], name: str, wrong: str, argv: list[str], status: int
) -> None:
    line = [a.replace("{F}", places.get(wrong, "")) for a in argv]
    for key, value in places.items():
        line = [a.replace("{" + key + "}", value) for a in line]
    done = _run(line)
    said = [s for s in done.stderr.splitlines() if not s.startswith("{")]  # not a JSON log
    assert done.returncode == status, (line, done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(said) == 1, (line, done.stderr)
    if wrong in FILE_STATUS:
        assert places[wrong] in said[0], said[0]


def test_every_command_the_help_lists_has_its_cases() -> None:
    listed = set(_commands())
    groups = {"journal", "audit", "analyze", "pit"}
    names = {n for n in listed - groups} | {f"{g} {c}" for g in groups for c in _commands(g)}
    names |= {"house-way check", "house-way diff"}  # verbs its help names in words
    assert names - set(CASES) == set(), "commands with no exit-status case"
    assert set(CASES) - names == set(), "cases of commands that do not exist"
