"""A way file nested deeply (issue 32, H1): a syntax error naming its line from every command
that reads a way (``house-way check``, ``house-way diff``, ``check-config``), never a traceback,
and ``check-config`` exits non-zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main
from controller.game.way import WaySyntaxError, load_way
from simulators import demo

DEPTH = 5_000  # far past the interpreter's recursion limit


def _planted(tmp_path: Path, opener: str = "[", closer: str = "]") -> Path:
    """A way file whose third line holds a value nested ``DEPTH`` deep."""
    path = tmp_path / "deep.toml"
    path.write_text(
        f'name = "deep"\n[[rule]]\nid = {opener * DEPTH}1{closer * DEPTH}\nclass = "pairs"\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ("{a = ", "}")])
def test_a_deeply_nested_way_is_a_syntax_error_naming_its_line(
    tmp_path: Path, opener: str, closer: str
) -> None:
    with pytest.raises(WaySyntaxError) as info:
        load_way(str(_planted(tmp_path, opener, closer)))
    assert info.value.line == 3 and "nested more than" in str(info.value)


def test_house_way_check_and_diff_say_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    deep = str(_planted(tmp_path))
    for args in (["house-way", "check", deep], ["house-way", "diff", deep, "classic"]):
        assert main(args) == 65  # not a way file (controller/exits.py)
        message = capsys.readouterr().err
        assert message.startswith("paigow-table house-way ") and "deep.toml:3" in message
        assert message.count("\n") == 1 and "Traceback" not in message


def test_check_config_refuses_a_deeply_nested_way(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    _planted(tmp_path)
    rules = 'wheel_rank = "second_highest"\n'
    config = tmp_path / "table.toml"
    config.write_text(
        demo.DEMO_CONFIG.format(
            table="PG-T1",
            shuffler=tmp_path / "shuffler",
            rng=tmp_path / "rng",
            journal=tmp_path / "journal.sqlite3",
        ).replace(rules, rules + 'house_way = "deep.toml"\n'),
        encoding="utf-8",
    )
    code = main(["check-config", str(config)])
    captured = capsys.readouterr()
    assert code != 0
    assert "deep.toml:3" in captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err
