"""`paigow-table` as a command: its help names every subcommand, a wrong or missing subcommand is
a usage error (status 2), and `check-config` names a misspelt key and fails."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import command_parser, main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = REPO / "config" / "table.example.toml"

# Every subcommand controller/cli/main.py registers (house-way itself, the others through
# the registrars of table, journal, audit, analyze, monitor and the pit).
SUBCOMMANDS = {
    "house-way",
    "run",
    "check-config",
    "demo",
    "kiosk",
    "journal",
    "dealer-pin",
    "supervisor-pin",
    "authenticate",
    "software",
    "audit",
    "analyze",
    "monitor",
    "schemas",
    "sign-command",
    "feed-key",
    "pit",
}


def paigow_table(*args: str) -> subprocess.CompletedProcess[str]:
    """The command as a person runs it, in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def registered(capsys: pytest.CaptureFixture[str]) -> set[str]:
    """The subcommands the parser accepts: its usage error for one it does not names them all
    (those without a help line too)."""
    with pytest.raises(SystemExit):
        command_parser().parse_args(["no-such-command"])
    err = capsys.readouterr().err
    listed = re.search(r"invalid choice: 'no-such-command' \(choose from ([^)]*)\)", err)
    assert listed is not None, err
    return set(re.findall(r"'([^']*)'", listed.group(1)))


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: paigow-table ")
    listed = set(re.findall(r"^ {4}([a-z][a-z-]*)(?: |$)", out, re.MULTILINE))
    assert listed >= SUBCOMMANDS, SUBCOMMANDS - listed
    assert listed == registered(capsys)  # none is hidden from the help


def test_an_unknown_subcommand_is_a_usage_error() -> None:
    done = paigow_table("no-such-command")
    assert done.returncode == 2
    assert done.stdout == ""
    # One line (issue 39: every status but 0 and 1), naming the help that shows the usage.
    [line] = done.stderr.splitlines()
    assert line.startswith("paigow-table: error: ") and line.endswith("(see paigow-table --help)")
    assert "invalid choice: 'no-such-command'" in line


def test_no_subcommand_is_a_usage_error() -> None:
    done = paigow_table()
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "the following arguments are required: COMMAND" in line


def test_check_config_names_a_misspelt_key_and_fails(tmp_path: Path) -> None:
    good = tmp_path / "table.toml"
    good.write_text(EXAMPLE_CONFIG.read_text())
    checked = paigow_table("check-config", str(good))
    assert checked.returncode == 0, checked.stderr
    assert f"{good}: OK" in checked.stdout

    text = EXAMPLE_CONFIG.read_text()
    assert text.count("\n[table]\n") == 1
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("\n[table]\n", '\n[table]\ntabel_colour = "red"\n'))
    refused = paigow_table("check-config", str(bad))
    assert refused.returncode != 0
    assert f"{bad}: table.tabel_colour: unknown key" in refused.stderr, refused.stderr
    assert ": OK" not in refused.stdout


def test_check_config_reports_a_misspelt_way_beside_every_other_error(tmp_path: Path) -> None:
    """Issue 34 item 4: the misspelt `house_way` was told only once every other error was
    fixed, contrary to docs/operations.md ("every error in one run")."""
    text = EXAMPLE_CONFIG.read_text()
    assert text.count('\nhouse_way = "dealer-open" ') == 1
    text = text.replace('\nhouse_way = "dealer-open" ', '\nhouse_way = "dealer-opn"  ')
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("\n[table]\n", '\n[table]\ntabel_colour = "red"\n'))
    refused = paigow_table("check-config", str(bad))
    assert refused.returncode == 1
    assert f"{bad}: table.tabel_colour: unknown key" in refused.stderr, refused.stderr
    assert f"{bad}: rules.house_way: no way 'dealer-opn'" in refused.stderr, refused.stderr
    # A way file named relative to the config, missing, beside the same error.
    (tmp_path / "ways").mkdir()
    bad.write_text(
        text.replace('house_way = "dealer-opn"', 'house_way = "ways/ours.toml"').replace(
            "\n[table]\n", '\n[table]\ntabel_colour = "red"\n'
        )
    )
    refused = paigow_table("check-config", str(bad))
    assert f"no way '{tmp_path / 'ways' / 'ours.toml'}'" in refused.stderr, refused.stderr
    assert "table.tabel_colour" in refused.stderr
