"""controller/game/house_way_cache.py and the CLI's batch path against the rule code: the same
settings, the same JSON lines byte for byte, and a packaged table that is what the rule code
gives today."""

from __future__ import annotations

import gzip
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cli.house_way import batch_line, rule_code_line
from controller.game.cards import DECK
from controller.game.house_way import RULE_IDS, house_way
from controller.game.house_way_cache import (
    TABLE_FILE,
    HouseWayCache,
    flush_possible,
    pattern_hands,
    write_tables,
)
from controller.game.setting import Rules, WheelRank

WHEELS = (Rules(), Rules(wheel_rank="lowest"))
CACHES = {r.wheel_rank: HouseWayCache.packaged(r) for r in WHEELS}
LINES = {r.wheel_rank: batch_line(r) for r in WHEELS}


@pytest.mark.exhaustive
def test_the_packaged_table_is_what_the_rule_code_gives_today(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fresh = write_tables(tmp_path / "table.bin.gz")
    assert gzip.decompress(fresh.read_bytes()) == gzip.decompress(TABLE_FILE.read_bytes()), (
        "the House Way changed: python -m controller.game.house_way_cache --write"
    )


def test_every_pattern_is_in_the_table_and_none_can_make_a_flush() -> None:
    hands = list(pattern_hands())
    assert len(hands) == 67_600
    for rules in WHEELS:
        cache = HouseWayCache.packaged(rules)
        assert len(cache.entries) == len(hands)
    assert not any(flush_possible(h) for h in hands)
    # Every rule and step is in the table but those only a flush can reach: a straight flush,
    # and a four of a kind or full house that is also complete (it has no room for a straight).
    for cache in CACHES.values():
        parts = {part for e in cache.entries.values() for part in e.rule.split("/")}
        assert parts == set(RULE_IDS) - {"CH-RF", "CH-SF", "CH→4K", "CH→FH"}


@settings(max_examples=3000, deadline=None)
@given(
    hand=st.lists(st.integers(0, 52), min_size=7, max_size=7, unique=True),
    wheel=st.sampled_from(["second_highest", "lowest"]),
)
def test_the_cache_sets_every_hand_as_the_rule_code(hand: list[int], wheel: WheelRank) -> None:
    cache = CACHES[wheel]
    assert cache.setting(hand) == house_way(hand, cache.rules)
    assert cache.setting(hand).rule == house_way(hand, cache.rules).rule


def test_random_hands_many_and_no_entry_computed_at_run_time() -> None:
    rng = random.Random(16)
    for rules in WHEELS:
        cache = HouseWayCache.packaged(rules)
        for _ in range(20_000):
            hand = rng.sample(range(53), 7)
            assert cache.setting(hand) == house_way(hand, rules)
        assert cache.misses == 0


@settings(max_examples=2000, deadline=None)
@given(
    hand=st.lists(st.integers(0, 52), min_size=7, max_size=7, unique=True),
    wheel=st.sampled_from(["second_highest", "lowest"]),
    commas=st.booleans(),
)
def test_the_cli_batch_line_is_the_rule_codes_line_byte_for_byte(
    hand: list[int], wheel: WheelRank, commas: bool
) -> None:
    text = (", " if commas else " ").join(str(DECK[c]) for c in hand)
    rules = Rules(wheel_rank=wheel)
    fast = LINES[wheel](text)
    assert fast == rule_code_line(1, text, rules)[0]


def test_lines_the_batch_does_not_read_go_to_the_rule_code() -> None:
    line = LINES["second_highest"]
    for text in ("As As Kd 2c 3c 4c 5c", "Xs 2d 3d 4d 5d 6d 7d", "As Kd", "as kd 7h 5s 3c 2d 9h"):
        assert line(text) is None
