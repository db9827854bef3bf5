"""`paigow-table house-way --way` and `analyze base-game --house-way` as a user runs them."""

from __future__ import annotations

import io
import json
import random

import pytest

from controller.cli import main
from controller.cli.house_way import house_way_lines
from controller.game.cards import DECK, card_texts
from controller.game.setting import Rules
from controller.game.way import load_way

HAND = ["Kc", "Kd", "5c", "5d", "Qh", "3h", "2s"]


def test_one_hand_by_another_way(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["house-way", "--way", "classic", "Kc", "Kd", "5c", "5d", "Qh", "3h", "2s"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[1:3] == ["5d", "5c"] and "pair of fives" in out[0]
    assert out[2].split() == ["Rule", "CL-2P-7"]
    assert main(["house-way", "Kc", "Kd", "5c", "5d", "Qh", "3h", "2s"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["Rule", "2P"]


def test_a_way_file_by_path_and_its_errors(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    classic = load_way("classic")
    path = tmp_path / "mine.toml"
    path.write_text(classic.text.raw.replace('name = "classic"', 'name = "mine"'))
    assert main(["house-way", "--json", "--way", str(path), "Kc Kd 5c 5d Qh 3h 2s"]) == 2
    capsys.readouterr()  # one argument is not seven cards
    args = ["house-way", "--json", "--way", str(path), *HAND]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["rule"] == "CL-2P-7"
    path.write_text('name = "mine"\n[[rule]]\nid = "X"\nclass = "pairs"\n')
    assert main(["house-way", "--way", str(path), *HAND]) == 65  # not a way file
    assert f"{path}:4: rule X: expected class = one of" in capsys.readouterr().err


@pytest.mark.parametrize("wheel", ["second_highest", "lowest"])
def test_a_stream_by_another_way_is_its_settings(wheel: str) -> None:
    rules = Rules(wheel_rank=wheel)  # type: ignore[arg-type]
    classic = load_way("classic")
    rng = random.Random(23)
    hands = [rng.sample(DECK, 7) for _ in range(3000)]
    out = io.StringIO()
    lines = [" ".join(card_texts(h)) for h in hands] + ["Kc Kc 5c 5d Qh 3h 2s"]
    assert house_way_lines(lines, out, rules, way=classic) == 1  # the last line is an error
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert records[-1] == {"line": 3001, "error": '"Kc": appears twice'}
    for hand, record in zip(hands, records, strict=False):
        setting = classic.set(hand, rules)
        assert record == {"cards": card_texts(hand), **setting.to_dict()}


def test_the_base_game_priced_by_a_way(capsys) -> None:  # type: ignore[no-untyped-def]
    argv = ["analyze", "base-game", "--rounds", "3000", "--workers", "1", "--json"]
    assert main([*argv, "--house-way", "classic", "--strategy", "house-way"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["house_way"] == {"name": "classic", "digest": load_way("classic").digest}
    assert record["rounds"] == 3000 and -1 < record["house_edge"] < 1
    lo, hi = record["ci95"]
    assert lo < record["house_edge"] < hi
    assert main([*argv, "--house-way", "no-such-way"]) == 2
    assert "no way 'no-such-way'" in capsys.readouterr().err
