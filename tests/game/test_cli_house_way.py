"""`paigow-table house-way` as a user runs it: arguments, --json, and streaming stdin."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from controller.cli import main

CMD = [sys.executable, "-m", "controller.cli", "house-way"]


def test_seven_cards_print_the_setting_for_a_person(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["house-way", "Qs", "Qh", "6s", "6h", "2s", "8s", "9s"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[1:3] == ["9s", "8s"] and "nine-eight" in out[0]
    assert "Qs Qh 6s 6h 2s" in out[1] and "two pair, queens and sixes" in out[1]
    assert out[2].split() == ["Rule", "CH→2P/2P"]


def test_json_is_one_object_with_every_field(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["house-way", "--json", "10h", "j♠", "QS", "KD", "JK", "3c", "4d"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record == {
        "cards": ["Th", "Js", "Qs", "Kd", "JK", "3c", "4d"],
        "front": ["4d", "3c"],
        "back": ["JK", "Kd", "Qs", "Js", "Th"],
        "rule": "CH-SF5",  # only 4-3 in front keeps T-J-Q-K-JK in back; no earlier rule applies
        "front_hand": "four-three",
        "back_hand": "straight, ace high",
    }


def test_wrong_arguments_give_a_clear_error_and_status_2(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["house-way", "As", "Kd"]) == 2
    assert "expected 7 cards, got 2" in capsys.readouterr().err
    assert main(["house-way", "As", "Kd", "Xs", "2c", "3c", "4c", "5c"]) == 2
    assert 'unknown rank "X"' in capsys.readouterr().err


def test_stdin_lines_give_json_lines_in_order_and_bad_lines_do_not_stop_it() -> None:
    lines = (
        "As Ah Ad JK 2s 3s 4s\nXs 2d 3d 4d 5d 6d 7d\n\nAc Kc Qc Jc Tc 9c 2d\nAs As Kd 2c 3c 4c 5c\n"
    )
    proc = subprocess.run(CMD, input=lines, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert out[0]["rule"] == "CH→4K/4K-A" and sorted(out[0]["front"]) == ["Ad", "Ah"]
    assert out[1] == {"line": 2, "error": '"Xs": unknown rank "X"'}
    assert out[2]["rule"] == "CH-K" and out[2]["cards"][0] == "Ac"
    assert out[3] == {"line": 5, "error": '"As": appears twice'}
    assert len(out) == 4


def test_all_good_lines_exit_zero() -> None:
    proc = subprocess.run(
        CMD, input="2c 3d 4h 5s 6c 7d 8h\n", capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["rule"] == "CH-SF5"


def test_it_streams_an_answer_before_stdin_is_closed() -> None:
    proc = subprocess.Popen(
        CMD, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        proc.stdin.write("Ac Kd 7h 5s 3c 2d 9h\n")
        proc.stdin.flush()
        reader.join(timeout=30)
        assert got and json.loads(got[0])["rule"] == "HC"  # answered while stdin is still open
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
