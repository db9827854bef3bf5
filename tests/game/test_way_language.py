"""The House Way language (controller/game/way/language.py): errors name the line and what was
expected; the digest follows the content, not the layout."""

from __future__ import annotations

import pytest

from controller.game.way.engine import WAYS_DIR, load_way, parse
from controller.game.way.language import WaySyntaxError, parse_way

HEAD = 'name = "mine"\n\n'
TAIL = """
[[rule]]
id = "HC"
class = "high card"
front = "the second and third highest singletons"
"""


def _error(text: str) -> WaySyntaxError:
    with pytest.raises(WaySyntaxError) as info:
        parse_way(text, "mine.toml")
    return info.value


@pytest.mark.parametrize(
    ("body", "line", "expected"),
    [
        # line 3 is the [[rule]] header, the keys follow
        (
            '[[rule]]\nid = "X"\nclass = "two pair"\nwhen = { low_pair = "7++" }\n'
            'front = "the low pair"\n',
            6,
            "low_pair: expected a rank",
        ),
        (
            '[[rule]]\nid = "X"\nclass = "two pair"\nwhen = { lo_pair = "7" }\n'
            'front = "the low pair"\n',
            6,
            "unknown condition 'lo_pair'",
        ),
        (
            '[[rule]]\nid = "X"\nclass = "two pair"\nfront = "the lowest pair"\n',
            6,
            "expected front = one of",
        ),
        (
            '[[rule]]\nid = "X"\nclass = "two pairs"\nfront = "the low pair"\n',
            5,
            "expected class = one of",
        ),
        ('[[rule]]\nclass = "two pair"\nfront = "the low pair"\n', 3, "expected id ="),
        (
            '[[rule]]\nid = "X"\nclass = "two pair"\n',
            3,
            "expected exactly one of front, play_as, keep_in_back",
        ),
        (
            '[[rule]]\nid = "X"\nclass = "two pair"\nplay_as = "one pair"\n',
            6,
            'play_as is for class "straight or flush"',
        ),
        (
            '[[rule]]\nid = "X"\nclass = "two pair"\nwhen = { singleton_ace = "no" }\n'
            'front = "the low pair"\n',
            6,
            "singleton_ace: expected true or false",
        ),
        (
            '[[rule]]\nid = "X"\nclass = "full house"\nwhen = { grouping = "3+2+1" }\n'
            'front = "the pair"\n',
            6,
            "does not add up to seven cards",
        ),
        (
            '[[rule]]\nid = "X"\nclass = "straight or flush"\nkeep_in_back = "straight"\n',
            6,
            "keep_in_back is for class",
        ),
        (
            '[[rule]]\nid = "X"\nclass = "two pair"\npriority = 0\nfront = "the low pair"\n',
            6,
            "expected priority = a whole number",
        ),
        (
            '[[rule]]\nid = "X"\nclass = "two pair"\nfront = "the low pair"\ncolour = 1\n',
            7,
            "unknown rule key 'colour'",
        ),
    ],
)
def test_an_error_names_the_line_and_what_was_expected(body: str, line: int, expected: str) -> None:
    err = _error(HEAD + body + TAIL)
    assert err.line == line, str(err)
    assert expected in err.message
    assert str(err).startswith(f"mine.toml:{line}: ")


def test_toml_syntax_errors_name_their_line() -> None:
    err = _error(HEAD + '[[rule]]\nid = "X\nclass = "two pair"\n')
    assert err.line == 4 and "not valid TOML" in err.message


def test_a_way_needs_a_name_and_a_rule() -> None:
    assert "expected name" in _error(TAIL).message
    assert "at least one [[rule]]" in _error(HEAD).message
    err = _error('name = "Big Way"\n' + TAIL)
    assert err.line == 1 and "lower-case" in err.message


def test_a_play_as_needs_the_class_it_names() -> None:
    err = _error(
        HEAD + '[[rule]]\nid = "CH→2P"\nclass = "straight or flush"\nplay_as = "two pair"\n' + TAIL
    )
    assert err.line == 3 and "'two pair', which has no rules" in err.message


def test_the_digest_follows_the_content_not_the_layout() -> None:
    text = (WAYS_DIR / "classic.toml").read_text(encoding="utf-8")
    way = parse(text)
    assert way.digest == load_way("classic").digest and len(way.digest) == 64
    relaid = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert parse(relaid.replace(" = ", "=")).digest == way.digest
    changed = text.replace(
        'when = { high_pair = "7+", singleton_ace = false }',
        'when = { low_pair = "7+", singleton_ace = false }',
    )
    assert changed != text and parse(changed).digest != way.digest


def test_the_shipped_ways_load_by_name_and_by_file() -> None:
    for name in ("dealer-open", "classic"):
        way = load_way(name)
        assert way.name == name and way.shipped
        assert load_way(WAYS_DIR / f"{name}.toml").digest == way.digest
    assert load_way().name == "dealer-open"
    with pytest.raises(FileNotFoundError, match=r"no way 'no-such-way'"):
        load_way("no-such-way")


def test_priorities_order_the_rules_and_ids_keep_the_file_order() -> None:
    way = parse_way(
        HEAD
        + '[[rule]]\nid = "B"\nclass = "two pair"\npriority = 2\nfront = "the low pair"\n'
        + '[[rule]]\nid = "A"\nclass = "two pair"\npriority = 1\nwhen = { pairs = 3 }\n'
        + 'front = "the high pair"\n'
        + TAIL
    )
    assert [r.id for r in way.rules["two pair"]] == ["A", "B"]
    assert way.rule_ids == ("B", "A", "HC")


def test_the_high_pair_reading_of_the_filed_way_splits_like_classic() -> None:
    """tests/game/ways/dealer-open-high-pair.toml: the filed way with its one two-pair rule
    read "the high pair Sevens or better" (docs/house-way.md, docs/rules.md §7 *Priced*)."""
    from pathlib import Path

    from controller.game.cards import parse_cards

    variant = load_way(Path(__file__).with_name("ways") / "dealer-open-high-pair.toml")
    hand = parse_cards("Kc Kd 5c 5d Qh 3h 2s")
    assert variant.set(hand).rule == "2P-77" and load_way("dealer-open").set(hand).rule == "2P"
    assert sorted(map(str, variant.set(hand).front)) == sorted(
        map(str, load_way("classic").set(hand).front)
    )
