"""`paigow-table analyze …` through the top-level parser: JSON shapes, text, the report, and
the progress bar (drawn only on a terminal)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from controller.analysis.census import Census
from controller.analysis.progress import Progress
from controller.cli import build_parser
from controller.cli.analyze import register

LINE_KEYS = ["line", "pays", "combinations", "probability", "return"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    args = build_parser([register]).parse_args(argv)
    code: int = args.func(args)
    return code, capsys.readouterr().out


def test_chan_chu_json_shape(census: Census, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["analyze", "chan-chu", "--paytable", "pt3", "--json"], capsys)
    assert code == 0
    record = json.loads(out)
    assert list(record)[:4] == ["paytable", "total", "lines", "house_edge"]
    assert record["paytable"] == "PT3" and record["total"] == 154_143_080
    assert round(record["house_edge"], 6) == 0.080008
    first = record["lines"][0]
    assert list(first) == LINE_KEYS
    assert first["line"] == "natural_7_straight_flush" and first["combinations"] == 32
    assert [line["line"] for line in record["lines"]][-2:] == ["three_pair", "other"]
    assert round(record["envy"]["per_other_player_5_dollar_wager"], 4) == 0.0054


def test_chan_chu_all_is_a_list(census: Census, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["analyze", "chan-chu", "--paytable", "all", "--json"], capsys)
    records = json.loads(out)
    assert code == 0 and [r["paytable"] for r in records] == ["PT1", "PT2", "PT3", "PT4", "PT5"]
    assert records[0]["lines"][0]["line"] == "any_7_straight_flush"
    assert "envy" not in records[0] and "envy" in records[4]


def test_chan_chu_text_sets_seed_001_beside(
    census: Census, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(["analyze", "chan-chu", "--paytable", "PT3"], capsys)
    assert code == 0
    assert "house edge 8.0008%" in out and "≠" not in out
    assert out.count(" =") >= 13


def test_unknown_paytable_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser([register]).parse_args(["analyze", "chan-chu", "--paytable", "PT9"])
    assert exc.value.code == 2
    assert "PT9" in capsys.readouterr().err


def test_dealer_jacks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["analyze", "dealer-jacks", "--json"], capsys)
    record = json.loads(out)
    assert code == 0 and record["exact_match"] is True and record["hands"] == 12_307_232
    assert round(record["probability"], 4) == 0.0798
    code, out = run(["analyze", "dealer-jacks"], capsys)
    assert "exactly equal: yes" in out


def test_base_game_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--wheel", "lowest", "analyze", "base-game", "--rounds", "3000", "--seed", "4"]
    code, out = run([*argv, "--strategy", "house-way", "--workers", "1", "--json"], capsys)
    record = json.loads(out)
    assert code == 0
    assert list(record)[:7] == ["strategy", "rounds", "win", "push", "lose", "house_edge", "ci95"]
    assert record["strategy"] == "house-way" and record["rounds"] == 3000
    assert set(record["by_dealer_class"]) == {"two_jacks", "ace_high", "other"}
    assert record["rules"] == {"wheel_rank": "lowest", "ace_high_pushes_pai_gow": False}
    lo, hi = record["ci95"]
    assert lo < record["house_edge"] < hi
    code, again = run([*argv, "--strategy", "house-way", "--workers", "2", "--json"], capsys)
    same = json.loads(again)
    for key in ("win", "push", "lose", "house_edge", "ci95", "by_dealer_class"):
        assert same[key] == record[key]


def test_base_game_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["analyze", "base-game", "--rounds", "2000", "--workers", "1"], capsys)
    assert code == 0 and "strategy optimal" in out and "1.82%" in out
    assert "the outside analysis" in out


def test_jacks_beat_exact_and_monte_carlo(
    census: Census, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["analyze", "jacks-beat", "--paytable", "b", "--rounds", "5000", "--json"]
    code, out = run(argv, capsys)
    record = json.loads(out)
    assert code == 0 and record["paytable"] == "B" and record["method"] == "exact"
    assert record["ci95"] is None and record["monte_carlo"]["method"] == "monte-carlo"
    assert round(record["house_edge"], 4) == 0.0884
    code, out = run(["analyze", "jacks-beat", "--paytable", "all", "--json"], capsys)
    assert [r["paytable"] for r in json.loads(out)] == ["A", "B", "C", "D"]


def test_ace_high(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["analyze", "ace-high", "--rounds", "4000", "--json"], capsys)
    record = json.loads(out)
    assert code == 0 and record["method"] == "monte-carlo" and record["total"] == 4000
    assert [line["line"] for line in record["lines"]] == [
        "dealer_and_player_ace_high",
        "dealer_ace_high_joker",
        "dealer_ace_high",
        "lose",
    ]


def test_report_writes_every_section(
    census: Census, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "math.md"
    argv = ["analyze", "report", "--output", str(target), "--rounds", "2000"]
    code, _ = run([*argv, "--side-rounds", "2000"], capsys)
    text = target.read_text(encoding="utf-8")
    assert code == 0
    for heading in (
        "## Summary",
        "## Chan Chu (exact)",
        "## Chan Chu Envy bonus (exact)",
        "## The dealer's two Jacks (exact)",
        "## Jacks Beat (exact)",
        "## Push Ace High (Monte Carlo)",
        "## The Pai Gow wager (Monte Carlo)",
        "### Beside the lab report's 1.82%",
        "## The Pai Gow wager by House Way",
    ):
        assert heading in text
    summary = text.split("## Chan Chu (exact)")[0]
    assert "**no**" not in summary.split("base game")[0]


def test_progress_draws_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    p = Progress("work", stream=quiet)
    p.start(4)
    p.advance(4)
    p.finish()
    assert quiet.getvalue() == ""
    shown = io.StringIO()
    p = Progress("work", stream=shown, force=True)
    p.start(2)
    p.advance(2)
    p.finish()
    assert "work [" in shown.getvalue() and "100.0%" in shown.getvalue()


def _screen(written: str) -> str:
    """What a terminal shows after carriage returns redraw one line."""
    shown = ""
    for part in written.split("\r"):
        shown = part + shown[len(part) :]
    return shown.rstrip()


def test_progress_at_completion_says_done_and_leaves_no_time_left() -> None:
    now = [0.0]
    out = io.StringIO()
    p = Progress("work", stream=out, force=True, clock=lambda: now[0])
    p.start(1000)
    now[0] = 5.0
    p.advance(10)  # 1%: a long "… s left" line is drawn
    assert "left" in _screen(out.getvalue())
    now[0] = 15.5
    p.advance(990)
    p.finish()
    screen = _screen(out.getvalue())
    assert screen.endswith("100.0% done in 15.5s"), screen
    assert "left" not in screen


def test_the_cli_declares_the_strategies_the_analysis_has() -> None:
    from controller.analysis.base_game import STRATEGIES
    from controller.cli import analyze

    assert analyze.STRATEGIES == STRATEGIES
