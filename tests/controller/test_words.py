"""What a person reads says what a dealer says: no code names (three_of_a_kind, short_packet)."""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path

from controller.game.paytables import CHAN_CHU_LINES, JACKS_BEAT_LINES, PUSH_ACE_HIGH_LINES
from controller.game.wagers import PaiGowResult
from controller.mqtt.feed import format_feed_line
from controller.words import LINES, PAI_GOW_REASONS, words
from simulators.demo import run_demo

CODE = re.compile(r"\b[a-z0-9]+_[a-z0-9_]+\b")


def test_every_paytable_line_has_words() -> None:
    for line in (*CHAN_CHU_LINES, *JACKS_BEAT_LINES, *PUSH_ACE_HIGH_LINES):
        assert line in LINES and not CODE.search(LINES[line])
    reasons = re.findall(r'"([a-z_]+)"', PaiGowResult.__doc__ or "")
    assert reasons and all(words(r) != r.replace("_", " ") or r in PAI_GOW_REASONS for r in reasons)
    assert words("something_new") == "something new"  # never shown raw


async def test_the_demo_prints_words_not_codes(tmp_path: Path) -> None:
    args = argparse.Namespace(
        rounds=12,
        seed=4,
        interval=0.0,
        fault_rate=0.5,
        journal=str(tmp_path / "j.sqlite3"),
        http_port=0,
        no_mqtt=True,
        broker=None,
        mqtt_port=None,
        drain_timeout=1.0,
    )
    out = io.StringIO()
    assert await run_demo(args, out) == 0
    text = out.getvalue()
    assert "ALL HANDS DEAD" in text and "Chan Chu" in text  # faults and settled rounds both seen
    shown = [line for line in text.splitlines() if not line.startswith("demo table ")]
    codes = {m for line in shown for m in CODE.findall(line)}
    assert codes == set(), codes
    # The PIN that acknowledges latched alarms is shown; the summary is for people.
    assert re.search(r"^supervisor PIN \(.*\): \d{6}$", text, re.M)
    last = text.splitlines()[-1]
    assert last.startswith("12 rounds closed; journal: 12 rounds (") and "{" not in last
    assert re.search(r"\(\d+ settled, ", last)


def test_the_feed_printer_says_words() -> None:
    dead = (
        b'{"schema":"paigow.round","version":1,"seq":1,"payload":{"round_seq":3,'
        b'"status":"dead","reasons":[{"code":"short_packet","detail":"packet 4 has 6 cards"}]}}'
    )
    line = format_feed_line("p/dead", dead, prefix="p/")
    assert "a packet was short" in line and "short_packet" not in line
