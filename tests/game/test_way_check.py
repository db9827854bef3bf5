"""``house-way check`` and ``house-way diff`` over every hand (controller/game/way/check.py,
diff.py): the shipped ways pass; a way with a hole, one with an overlap its priorities leave
open and one with a foul each fail, naming a hand that really fails; the two shipped ways differ
on the share of hands a sample of the classic way's description measured, nearly all in
one two-pair rule."""

from __future__ import annotations

import json
import re

import pytest

from controller.cli import main
from controller.game.way import WayError, load_way
from controller.game.way.check import ALL_HANDS, check_way, example_cards
from controller.game.way.diff import diff_ways
from controller.game.way.engine import WAYS_DIR, Way, parse
from controller.game.way.proof import proof_path, proof_problem

pytestmark = pytest.mark.exhaustive  # each check sets every hand class: about half a minute

FILED = (WAYS_DIR / "dealer-open.toml").read_text(encoding="utf-8")


def _variant(old: str, new: str) -> Way:
    assert old in FILED
    return parse(FILED.replace(old, new, 1), "variant.toml")


def _fails_as(way: Way, kind: str) -> tuple[str, int]:
    report = check_way(way, workers=2)
    assert not report.passed
    # One failure, and the same again for hands that can make a wheel, under the other rule.
    assert {f.kind for f in report.failures} == {kind}, report.failures
    assert [f for f in report.failures if "other wheel rule" not in f.detail] == [
        report.failures[0]
    ]
    failure = report.failures[0]
    with pytest.raises(WayError) as info:
        way.set_by_rules(example_cards(failure.example))
    assert info.value.kind == kind
    return failure.detail, failure.hands


#: The shipped ways' check, their diff and the test of their sharing run in one worker, so
#: every hand class is decided once per way (tests/conftest.py honours the group).
SHIPPED = pytest.mark.xdist_group("exhaustive:shipped-ways")


@SHIPPED
@pytest.mark.parametrize("name", ["dealer-open", "classic"])
def test_the_shipped_ways_pass_over_every_hand(name: str) -> None:
    way = load_way(name)
    report = check_way(way, workers=2)
    assert report.passed, report.failures
    assert report.hands == ALL_HANDS == sum(report.by_rule.values())
    assert report.never_used == []
    assert report.to_dict()["digest"] == way.digest


@SHIPPED
def test_diff_of_the_shipped_ways(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["house-way", "diff", "dealer-open", "classic", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hands"] == ALL_HANDS and report["unset"] == 0
    # 6.246 %: a 200,000-hand sample gave 6.247 % (6.141-6.353)
    assert report["differ"] == 9_628_320
    top = report["by_rule_pair"][0]
    assert (top["rule_a"], top["rule_b"], top["hands"]) == ("2P", "CL-2P-7", 9_480_240)
    assert top["hands"] / report["differ"] > 0.98
    assert sum(p["hands"] for p in report["by_rule_pair"]) == report["differ"]
    for p in report["by_rule_pair"]:
        cards = example_cards(p["example"])
        a, b = load_way("dealer-open").set(cards), load_way("classic").set(cards)
        assert (a.rule, b.rule) == (p["rule_a"], p["rule_b"])
        assert (a.front_value, a.back_value) != (b.front_value, b.back_value)


@SHIPPED
def test_a_check_and_a_diff_decide_each_way_once() -> None:
    """The exhaustive work is done once per way digest in a process: a diff after the checks
    of both ways sets no hand again, and the reports are those of a fresh run's."""
    a, b = load_way("dealer-open"), load_way("classic")
    for way in (a, b):
        steps = _Steps()
        assert check_way(way, workers=2, progress=steps).passed
        assert sum(steps.advances) == ALL_HANDS  # every hand set once (or known already)
    steps = _Steps()
    report = diff_ways(a, b, workers=2, progress=steps)
    # Each way's decisions known at once (a way decided again reports hands as it sets them).
    assert steps.advances == [ALL_HANDS, ALL_HANDS]
    assert report.differ == 9_628_320 and report.unset == 0


class _Steps:
    """A progress display that keeps every step it is shown."""

    def __init__(self) -> None:
        self.advances: list[int] = []

    def start(self, total: int) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        self.advances.append(n)

    def finish(self) -> None:
        pass


def test_a_hole_is_found_with_a_hand() -> None:
    way = _variant(
        '[[rule]]\nid = "2P"\nclass = "two pair"\nfront = "the two highest singletons"\n', ""
    )
    detail, hands = _fails_as(way, "hole")
    assert "no rule of class 'two pair' applies" in detail
    assert hands == 18_129_312 + 256_608  # what 2P set, directly and after CH→2P


def test_an_overlap_the_priorities_leave_open_is_found_with_a_hand(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Through the command line, as an analyst runs it."""
    path = tmp_path / "overlap.toml"
    path.write_text(
        FILED.replace(
            'id = "2P-AA"\nclass = "two pair"\n',
            'id = "2P-AA"\nclass = "two pair"\npriority = 2\n',
            1,
        ),
        encoding="utf-8",
    )
    assert main(["house-way", "check", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is False and report["hands"] == ALL_HANDS
    # The same overlap, and again for the hands that can make a wheel under the other rule.
    assert {f["kind"] for f in report["failures"]} == {"overlap"}
    failure = report["failures"][0]
    assert "other wheel rule" not in failure["detail"] and failure["hands"] > 0
    assert "2P-77 (line 128)" in failure["detail"] and "2P-AA (line 141)" in failure["detail"]
    with pytest.raises(WayError) as info:
        load_way(path).set_by_rules(example_cards(failure["example"]))
    assert info.value.kind == "overlap"
    assert not proof_path(path).exists()  # no record: a table refuses it


def test_a_way_file_that_passes_gets_its_proof_and_its_table(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A way file (classic's rules under another name) through the command line: it passes,
    under both wheel rules, and the record a table asks for and the pattern table are written."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "house.toml"
    text = (WAYS_DIR / "classic.toml").read_text(encoding="utf-8")
    path.write_text(text.replace('name = "classic"', 'name = "our-house"'), encoding="utf-8")
    way = load_way(path)
    assert not way.shipped and proof_problem(way, path) is not None
    assert main(["house-way", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "PASSED" in out and f"Proof    {proof_path(path)}" in out
    # The hands each rule sets, as docs/house-way.md promises, summing to every hand.
    counts = re.findall(r"^Rule +(\S+) +([\d,]+) hands ", out, re.MULTILINE)
    assert ("CL-1P", "64,221,960") in counts
    assert sum(int(n.replace(",", "")) for _, n in counts) == ALL_HANDS
    assert proof_problem(way, path) is None
    assert len(way.pattern_table().index) == 67_600  # from the user's cache, by digest
    hand = example_cards("Kc Kd 5c 5d Qh 3h 2s")
    assert way.set(hand).rule == "CL-2P-7"


def test_a_foul_is_found_with_a_hand() -> None:
    way = _variant(
        'id = "1P"\nclass = "one pair"\nfront = "the two highest singletons"',
        'id = "1P"\nclass = "one pair"\nfront = "the pair"',
    )
    detail, hands = _fails_as(way, "foul")
    assert detail.startswith("rule 1P: the front it sets beats the back") and hands == 64_221_960


def test_check_from_the_command_line_names_the_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.toml"
    bad.write_text(FILED.replace('front = "the low pair"', 'front = "the lowest pair"', 1))
    assert main(["house-way", "check", str(bad)]) == 65  # not a way file: not a finding
    message = capsys.readouterr().err
    assert f"{bad}:132: " in message and "expected front = one of" in message
